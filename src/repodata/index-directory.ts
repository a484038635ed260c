import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { isReposyncError, ReposyncError } from "../errors.js";
import { readRpmFile } from "../rpm/read-header.js";
import { findRpmFiles } from "./find-rpm-files.js";
import { type PackageFragments, renderPackage } from "./fragments.js";
import { writeRepodataDirectory } from "./repodata-directory.js";
import { buildSnapshot, compareLocations, type RepodataSnapshot } from "./snapshot.js";

/** Options of `indexDirectory`. */
export interface IndexDirectoryOptions {
  /** Changelog entries kept per package in other.xml (createrepo_c's default is 10). */
  readonly changelogLimit: number;
  /**
   * Files read at once. Hashing is I/O and OpenSSL, parsing is short JavaScript: a few in flight
   * keep two cores busy without holding more than a few read buffers. Default 4.
   */
  readonly concurrency?: number;
  /** Called for each `.rpm` that is left out, with a one-line reason. */
  readonly onSkip?: (file: string, reason: string) => void;
  /** Called after each file, done of total. */
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

interface IndexedPackage {
  readonly href: string;
  readonly fileTime: number;
  readonly fragments: PackageFragments;
}

const HASH_CHUNK = 1024 * 1024;

/** sha256 of a whole file, streamed: a package is never held in memory. */
async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path, { highWaterMark: HASH_CHUNK })) {
    hash.update(chunk as Buffer);
  }
  return hash.digest("hex");
}

async function requireDirectory(dir: string): Promise<void> {
  let isDirectory: boolean;
  try {
    isDirectory = (await stat(dir)).isDirectory();
  } catch (cause) {
    throw new ReposyncError("USAGE", `${dir} does not exist or cannot be read`, { cause });
  }
  if (!isDirectory) throw new ReposyncError("USAGE", `${dir} is not a directory`);
}

/** A file-system failure on one file (it vanished, no permission) skips it like a bad package. */
function skipReason(err: unknown): string | null {
  if (isReposyncError(err)) return err.message;
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (typeof code === "string" && err instanceof Error) return err.message;
  return null;
}

async function indexOne(
  dir: string,
  href: string,
  changelogLimit: number,
): Promise<IndexedPackage> {
  const path = join(dir, href);
  // The header read is positional and small; both reads of the head hit the page cache.
  const [sha256, pkg, info] = await Promise.all([sha256File(path), readRpmFile(path), stat(path)]);
  if (info.size !== pkg.fileSize) {
    throw new ReposyncError("RPM_SIZE_MISMATCH", "the file changed while it was being read");
  }
  // createrepo_c's `time file` is the file's mtime in whole seconds.
  const fileTime = Math.floor(info.mtimeMs / 1000);
  const fragments = renderPackage(pkg, { sha256, locationHref: href, fileTime, changelogLimit });
  return { href, fileTime, fragments };
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
  let next = 0;
  options.onProgress?.(0, files.length);

  // A small pool of workers pulling the next file: at most `concurrency` files are open at once.
  const worker = async (): Promise<void> => {
    while (next < files.length) {
      const href = files[next++] as string;
      try {
        indexed.push(await indexOne(dir, href, options.changelogLimit));
      } catch (err) {
        const reason = skipReason(err);
        if (reason === null) throw err;
        skipped++;
        options.onSkip?.(href, reason);
      }
      options.onProgress?.(++done, files.length);
    }
  };
  const concurrency = Math.max(1, options.concurrency ?? 4);
  await Promise.all(Array.from({ length: Math.min(concurrency, files.length) }, worker));

  indexed.sort((a, b) => compareLocations(a.href, b.href));
  const revision = indexed.reduce((max, p) => Math.max(max, p.fileTime), 0);
  const snapshot = await buildSnapshot(
    indexed.map((p) => p.fragments),
    { packages: indexed.length, revision },
  );
  const repodataDir = await writeRepodataDirectory(dir, snapshot);
  return { packages: indexed.length, skipped, repodataDir, snapshot };
}
