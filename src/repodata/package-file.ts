import { createHash, hash as hashOnce } from "node:crypto";
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import { isReposyncError, ReposyncError } from "../errors.js";
import type { RpmPackage } from "../rpm/package.js";
import { type RangeReader, readRpmHeader } from "../rpm/read-header.js";
import { type PackageFragments, renderPackage } from "./fragments.js";

/**
 * Bytes read at a time, into one reused buffer. 256 KiB holds most packages' headers whole (and
 * small packages entirely), so the header is parsed from the bytes being hashed.
 */
export const READ_CHUNK = 256 * 1024;

/** One package file of a folder, ready for the snapshot. */
export interface IndexedPackage {
  /** Path relative to the folder, `/`-separated: the location href. */
  readonly href: string;
  /** mtime in whole seconds: createrepo_c's `time file`. */
  readonly fileTime: number;
  readonly fragments: PackageFragments;
}

/** The outcome for one file: its package, or why it was skipped. */
export type PackageFileOutcome =
  | { readonly ok: true; readonly indexed: IndexedPackage }
  | { readonly ok: false; readonly href: string; readonly reason: string };

/**
 * Reads one package file once: the first chunk feeds both the sha256 and the header parser (which
 * asks for more, positionally, only for a header larger than the chunk); the rest is streamed
 * through the hash with the same buffer. One open, one fstat, no per-file allocation.
 *
 * The calls are synchronous on purpose. With ten thousand small files, the per-call cost of
 * promise-based fs (a thread-pool round trip and a promise each for open, fstat, read and close)
 * was larger than the reading itself, and page-cached reads of a few KiB take microseconds. It
 * runs in index worker threads, or between yields to the event loop when there are none.
 */
async function readPackageFile(
  path: string,
  buffer: Buffer,
): Promise<{ pkg: RpmPackage; sha256: string; mtimeMs: number }> {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (cause) {
    throw new ReposyncError("IO_ERROR", `cannot open it: ${(cause as Error).message}`, { cause });
  }
  try {
    const { size, mtimeMs } = fstatSync(fd);
    const held = readSync(fd, buffer, 0, Math.min(READ_CHUNK, size), 0);
    const read: RangeReader = async (start, end) => {
      if (end <= held) return buffer.subarray(start, end);
      const length = Math.max(0, Math.min(end, size) - start);
      const more = Buffer.allocUnsafe(length);
      return more.subarray(0, readSync(fd, more, 0, length, start));
    };
    // Parsed to plain strings and numbers before the buffer is reused for the rest of the hash.
    const { pkg } = await readRpmHeader(read, { fileSize: size, firstRead: READ_CHUNK });
    if (held >= size) {
      // The whole file is in the buffer (most packages): a one-shot hash skips the Hash object.
      return { pkg, sha256: hashOnce("sha256", buffer.subarray(0, held), "hex"), mtimeMs };
    }
    const hash = createHash("sha256");
    hash.update(buffer.subarray(0, held));
    for (let position = held; position < size; ) {
      const bytesRead = readSync(fd, buffer, 0, READ_CHUNK, position);
      if (bytesRead === 0) {
        throw new ReposyncError("RPM_SIZE_MISMATCH", "the file shrank while it was being read");
      }
      hash.update(buffer.subarray(0, bytesRead));
      position += bytesRead;
    }
    return { pkg, sha256: hash.digest("hex"), mtimeMs };
  } finally {
    closeSync(fd);
  }
}

/** A file-system failure on one file (it vanished, no permission) skips it like a bad package. */
function skipReason(err: unknown): string | null {
  if (isReposyncError(err)) return err.message;
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (typeof code === "string" && err instanceof Error) return err.message;
  return null;
}

/**
 * Hashes, parses and renders `dir/href` with `buffer` (READ_CHUNK bytes, reused). An unreadable
 * or invalid package becomes a skip with a one-line reason; anything else is a bug and throws.
 */
export async function indexPackageFile(
  dir: string,
  href: string,
  changelogLimit: number,
  buffer: Buffer,
): Promise<PackageFileOutcome> {
  try {
    const { pkg, sha256, mtimeMs } = await readPackageFile(join(dir, href), buffer);
    const fileTime = Math.floor(mtimeMs / 1000);
    const fragments = renderPackage(pkg, { sha256, locationHref: href, fileTime, changelogLimit });
    return { ok: true, indexed: { href, fileTime, fragments } };
  } catch (err) {
    const reason = skipReason(err);
    if (reason === null) throw err;
    return { ok: false, href, reason };
  }
}
