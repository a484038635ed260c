import { existsSync } from "node:fs";
import { stat } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { ReposyncError } from "../errors.js";
import { findRpmFiles } from "./find-rpm-files.js";
import type { IndexWorkerRequest, IndexWorkerResponse } from "./index-worker.js";
import {
  type IndexedPackage,
  indexPackageFile,
  type PackageFileOutcome,
  READ_CHUNK,
} from "./package-file.js";
import { writeRepodataDirectory } from "./repodata-directory.js";
import { buildSnapshot, compareLocations, type RepodataSnapshot } from "./snapshot.js";

/** Options of `indexDirectory`. */
export interface IndexDirectoryOptions {
  /** Changelog entries kept per package in other.xml (createrepo_c's default is 10). */
  readonly changelogLimit: number;
  /**
   * Worker threads that read, parse and render packages; 0 does it all in this thread. Default:
   * one per core, at most 4. Without the compiled worker script (tests run the TypeScript
   * sources) the work stays in this thread whatever this says.
   */
  readonly threads?: number;
  /** Called for each `.rpm` that is left out, with a one-line reason. */
  readonly onSkip?: (file: string, reason: string) => void;
  /** Called as files are done, done of total. */
  readonly onProgress?: (done: number, total: number) => void;
}

/** What `indexDirectory` did. */
export interface IndexDirectoryResult {
  readonly packages: number;
  readonly skipped: number;
  /** The repodata folder written. */
  readonly repodataDir: string;
  readonly snapshot: RepodataSnapshot;
}

/** Files per message to a worker: large enough to amortise messaging, small enough to balance. */
const BATCH = 64;
/**
 * A worker's heap cap. Parsing makes short-lived garbage; a small young-to-old budget keeps each
 * thread's footprint near its live data instead of letting V8 grow the heap to hundreds of MB.
 */
const WORKER_HEAP_MB = 64;
const WORKER_URL = new URL("./index-worker.js", import.meta.url);

async function requireDirectory(dir: string): Promise<void> {
  let isDirectory: boolean;
  try {
    isDirectory = (await stat(dir)).isDirectory();
  } catch (cause) {
    throw new ReposyncError("USAGE", `${dir} does not exist or cannot be read`, { cause });
  }
  if (!isDirectory) throw new ReposyncError("USAGE", `${dir} is not a directory`);
}

function workerScriptExists(): boolean {
  return WORKER_URL.pathname.endsWith(".js") && existsSync(fileURLToPath(WORKER_URL));
}

/** Processes `hrefs` in this thread, yielding now and then so timers (a progress bar) run. */
async function inThisThread(
  dir: string,
  hrefs: readonly string[],
  changelogLimit: number,
  onOutcome: (outcome: PackageFileOutcome) => void,
): Promise<void> {
  const buffer = Buffer.allocUnsafe(READ_CHUNK);
  for (let i = 0; i < hrefs.length; i++) {
    onOutcome(await indexPackageFile(dir, hrefs[i] as string, changelogLimit, buffer));
    if (i % BATCH === BATCH - 1) await yieldToEventLoop();
  }
}

/**
 * Processes `hrefs` on `threads` workers, each pulling the next batch when it answers one. The
 * first bug in any worker rejects the whole run; the workers are always terminated.
 */
async function inWorkers(
  dir: string,
  hrefs: readonly string[],
  changelogLimit: number,
  threads: number,
  onOutcome: (outcome: PackageFileOutcome) => void,
): Promise<void> {
  const batches: string[][] = [];
  for (let i = 0; i < hrefs.length; i += BATCH) batches.push(hrefs.slice(i, i + BATCH));
  const workers = Array.from(
    { length: Math.min(threads, batches.length) },
    () => new Worker(WORKER_URL, { resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB } }),
  );
  try {
    await new Promise<void>((resolve, reject) => {
      let next = 0;
      let busy = 0;
      const feed = (worker: Worker): void => {
        const hrefsOfBatch = batches[next++];
        if (hrefsOfBatch === undefined) {
          if (busy === 0) resolve();
          return;
        }
        busy++;
        worker.postMessage({
          dir,
          hrefs: hrefsOfBatch,
          changelogLimit,
        } satisfies IndexWorkerRequest);
      };
      for (const worker of workers) {
        worker.on("message", (response: IndexWorkerResponse) => {
          busy--;
          if ("error" in response) {
            reject(new Error(`index worker failed: ${response.error}`));
            return;
          }
          for (const outcome of response.outcomes) onOutcome(outcome);
          feed(worker);
        });
        worker.on("error", reject);
        worker.on("exit", (code) => {
          if (code !== 0) reject(new Error(`index worker exited with code ${code}`));
        });
      }
      for (const worker of workers) feed(worker);
      if (workers.length === 0) resolve();
    });
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

/**
 * Writes `dir/repodata` for the RPMs under `dir`, as `createrepo_c --no-database dir` would
 * (field for field; see docs/rpm-repodata.md). A file that is not a readable RPM is skipped and
 * reported through `onSkip`; the repodata is swapped in atomically. The revision is the newest
 * package's file time, so indexing unchanged files again gives the same bytes.
 */
export async function indexDirectory(
  dir: string,
  options: IndexDirectoryOptions,
): Promise<IndexDirectoryResult> {
  await requireDirectory(dir);
  const files = await findRpmFiles(dir);
  const indexed: IndexedPackage[] = [];
  let skipped = 0;
  let done = 0;
  options.onProgress?.(0, files.length);
  const onOutcome = (outcome: PackageFileOutcome): void => {
    if (outcome.ok) {
      indexed.push(outcome.indexed);
    } else {
      skipped++;
      options.onSkip?.(outcome.href, outcome.reason);
    }
    options.onProgress?.(++done, files.length);
  };

  const threads = options.threads ?? Math.min(availableParallelism(), 4);
  if (threads > 0 && files.length > BATCH && workerScriptExists()) {
    await inWorkers(dir, files, options.changelogLimit, threads, onOutcome);
  } else {
    await inThisThread(dir, files, options.changelogLimit, onOutcome);
  }

  indexed.sort((a, b) => compareLocations(a.href, b.href));
  const revision = indexed.reduce((max, p) => Math.max(max, p.fileTime), 0);
  const snapshot = await buildSnapshot(
    indexed.map((p) => p.fragments),
    { packages: indexed.length, revision },
  );
  const repodataDir = await writeRepodataDirectory(dir, snapshot);
  return { packages: indexed.length, skipped, repodataDir, snapshot };
}
