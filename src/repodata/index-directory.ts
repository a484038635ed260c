import { createHash } from "node:crypto";
import { type FileHandle, open, stat } from "node:fs/promises";
import { join } from "node:path";
import { isReposyncError, ReposyncError } from "../errors.js";
import type { RpmPackage } from "../rpm/package.js";
import { type RangeReader, readRpmHeader } from "../rpm/read-header.js";
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

/**
 * Bytes read at a time, into one buffer per worker. 256 KiB holds most packages' headers whole
 * (and small packages entirely), so the header is parsed from the bytes being hashed.
 */
const CHUNK = 256 * 1024;

/**
 * Reads one package file once: the first chunk feeds both the sha256 and the header parser (which
 * asks for more, positionally, only for a header larger than the chunk); the rest is streamed
 * through the hash with the same buffer. One open, one stat, no per-file allocation: with ten
 * thousand small files, per-file overhead and garbage are what cost time.
 */
async function readPackageFile(
  path: string,
  buffer: Buffer,
): Promise<{ pkg: RpmPackage; sha256: string; mtimeMs: number }> {
  let handle: FileHandle;
  try {
    handle = await open(path, "r");
  } catch (cause) {
    throw new ReposyncError("IO_ERROR", `cannot open it: ${(cause as Error).message}`, { cause });
  }
  try {
    const { size, mtimeMs } = await handle.stat();
    const hash = createHash("sha256");
    const { bytesRead: held } = await handle.read(buffer, 0, Math.min(CHUNK, size), 0);
    hash.update(buffer.subarray(0, held));
    const read: RangeReader = async (start, end) => {
      if (end <= held) return buffer.subarray(start, end);
      const length = Math.max(0, Math.min(end, size) - start);
      const more = Buffer.allocUnsafe(length);
      const { bytesRead } = await handle.read(more, 0, length, start);
      return more.subarray(0, bytesRead);
    };
    // Parsed to plain strings and numbers before the buffer is reused for the rest of the hash.
    const { pkg } = await readRpmHeader(read, { fileSize: size, firstRead: CHUNK });
    for (let position = held; position < size; ) {
      const { bytesRead } = await handle.read(buffer, 0, CHUNK, position);
      if (bytesRead === 0)
        throw new ReposyncError("RPM_SIZE_MISMATCH", "the file shrank while it was being read");
      hash.update(buffer.subarray(0, bytesRead));
      position += bytesRead;
    }
    return { pkg, sha256: hash.digest("hex"), mtimeMs };
  } finally {
    await handle.close();
  }
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
  buffer: Buffer,
): Promise<IndexedPackage> {
  const { pkg, sha256, mtimeMs } = await readPackageFile(join(dir, href), buffer);
  // createrepo_c's `time file` is the file's mtime in whole seconds.
  const fileTime = Math.floor(mtimeMs / 1000);
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
    const buffer = Buffer.allocUnsafe(CHUNK);
    while (next < files.length) {
      const href = files[next++] as string;
      try {
        indexed.push(await indexOne(dir, href, options.changelogLimit, buffer));
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
