import { existsSync } from "node:fs";
import { stat } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { ReposyncError } from "../errors.js";
import { findRpmFiles } from "./find-rpm-files.js";
import { type IndexedBatch, indexBatch } from "./index-batch.js";
import type { IndexWorkerRequest, IndexWorkerResponse } from "./index-worker.js";
import { READ_CHUNK } from "./package-file.js";
import { writeRepodataDirectory } from "./repodata-directory.js";
import { compareLocations, type RepodataSnapshot, SnapshotWriter } from "./snapshot.js";

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

/** Processes the batches in this thread, in order, yielding between them so timers run. */
async function inThisThread(
  dir: string,
  batches: readonly (readonly string[])[],
  changelogLimit: number,
  onBatch: (index: number, batch: IndexedBatch) => void,
): Promise<void> {
  const buffer = Buffer.allocUnsafe(READ_CHUNK);
  for (const [index, hrefs] of batches.entries()) {
    onBatch(index, await indexBatch(dir, hrefs, changelogLimit, buffer));
    await yieldToEventLoop();
  }
}

/**
 * Processes the batches on `threads` workers, each pulling the next batch when it answers one,
 * so batches finish roughly (not exactly) in order. The first bug in any worker rejects the
 * whole run; the workers are always terminated.
 */
async function inWorkers(
  dir: string,
  batches: readonly (readonly string[])[],
  changelogLimit: number,
  threads: number,
  onBatch: (index: number, batch: IndexedBatch) => void,
): Promise<void> {
  const workers = Array.from(
    { length: Math.min(threads, batches.length) },
    () => new Worker(WORKER_URL, { resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB } }),
  );
  try {
    await new Promise<void>((resolve, reject) => {
      let next = 0;
      let busy = 0;
      const feed = (worker: Worker): void => {
        const index = next++;
        const hrefs = batches[index];
        if (hrefs === undefined) {
          if (busy === 0) resolve();
          return;
        }
        busy++;
        worker.once("message", (response: IndexWorkerResponse) => {
          busy--;
          if ("error" in response) {
            reject(new Error(`index worker failed: ${response.error}`));
            return;
          }
          onBatch(index, response.batch);
          feed(worker);
        });
        worker.postMessage({ dir, hrefs, changelogLimit } satisfies IndexWorkerRequest);
      };
      for (const worker of workers) {
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
 *
 * The files are sorted into snapshot order before any is read, and batches are compressed as
 * they come back (a batch that overtakes an earlier one waits for it), so assembling the
 * snapshot overlaps reading instead of following it.
 */
export async function indexDirectory(
  dir: string,
  options: IndexDirectoryOptions,
): Promise<IndexDirectoryResult> {
  await requireDirectory(dir);
  const files = (await findRpmFiles(dir)).sort(compareLocations);
  const batches: string[][] = [];
  for (let i = 0; i < files.length; i += BATCH) batches.push(files.slice(i, i + BATCH));

  // The root elements state the package count before the first package. Skips are rare, so the
  // count is taken to be every file found; if any file is skipped, the snapshot is written again
  // at the end from the batches held here, with the true count (a batch's XML holds only the
  // packages that were indexed, so nothing else changes).
  let writer = new SnapshotWriter(files.length);
  const held: IndexedBatch[] = [];
  let written = 0;
  let packages = 0;
  let skipped = 0;
  let revision = 0;
  let done = 0;
  options.onProgress?.(0, files.length);
  const onBatch = (index: number, batch: IndexedBatch): void => {
    held[index] = batch;
    packages += batch.packages;
    skipped += batch.skipped.length;
    revision = Math.max(revision, batch.newestFileTime);
    for (const skip of batch.skipped) options.onSkip?.(skip.href, skip.reason);
    for (let ready = held[written]; ready !== undefined; ready = held[++written]) {
      writer.add(ready.packages, ready.xml);
    }
    done += batch.packages + batch.skipped.length;
    options.onProgress?.(done, files.length);
  };

  try {
    const threads = options.threads ?? Math.min(availableParallelism(), 4);
    if (threads > 0 && files.length > BATCH && workerScriptExists()) {
      await inWorkers(dir, batches, options.changelogLimit, threads, onBatch);
    } else {
      await inThisThread(dir, batches, options.changelogLimit, onBatch);
    }
  } catch (err) {
    writer.abort();
    throw err;
  }
  if (skipped > 0) {
    writer.abort();
    writer = new SnapshotWriter(packages);
    for (const batch of held) writer.add(batch.packages, batch.xml);
  }
  const snapshot = await writer.finish(revision);
  const repodataDir = await writeRepodataDirectory(dir, snapshot);
  return { packages, skipped, repodataDir, snapshot };
}
