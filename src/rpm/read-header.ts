import { open } from "node:fs/promises";
import { ReposyncError } from "../errors.js";
import type { RpmPackage } from "./package.js";
import { type ParseOptions, parseRpmPrefix } from "./parse-header.js";

/**
 * Returns the file's bytes from `start`, ideally up to `end`. It may return more (a server that
 * ignored Range and answered 200 with everything after `start`) or fewer (end of file).
 */
export type RangeReader = (start: number, end: number) => Promise<Uint8Array>;

export interface ReadHeaderOptions extends ParseOptions {
  /**
   * Size of the first read. 64 KiB holds the whole header of most packages, so one request is
   * usually all it takes; a larger header costs exactly one more, for exactly the missing bytes.
   */
  firstRead?: number;
}

export interface ReadHeaderResult {
  pkg: RpmPackage;
  /** Bytes the reader returned in all. */
  bytesRead: number;
  /** Calls made to the reader. */
  reads: number;
}

export const DEFAULT_FIRST_READ = 64 * 1024;

/** Reads an RPM's header through `read`, asking only for the byte ranges the parser needs. */
export async function readRpmHeader(
  read: RangeReader,
  options: ReadHeaderOptions = {},
): Promise<ReadHeaderResult> {
  const { firstRead = DEFAULT_FIRST_READ, ...parseOptions } = options;
  const firstEnd =
    options.fileSize === undefined ? firstRead : Math.min(firstRead, options.fileSize);
  let held = asBuffer(await read(0, firstEnd));
  let bytesRead = held.length;
  let reads = 1;
  for (;;) {
    const step = parseRpmPrefix(held, parseOptions);
    if (step.kind === "package") return { pkg: step.pkg, bytesRead, reads };
    // The loop ends: every read must add at least one byte (none is the end of the file), and
    // the parser never asks past maxHeaderBytes. A reader that returns short ranges before the
    // end simply costs more reads; a well-behaved one needs at most three after the first.
    const chunk = await read(step.start, step.end);
    reads++;
    if (chunk.length === 0) {
      throw new ReposyncError(
        "RPM_TRUNCATED",
        `the file ends at byte ${held.length}, but the header needs ${step.end}`,
      );
    }
    bytesRead += chunk.length;
    held = Buffer.concat([held, chunk]);
  }
}

/** A view of the reader's bytes, not a copy: a 200 answer may hold a large file. */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes)
    ? bytes
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * Parses an RPM file on disk with positional reads of its header alone, and checks that the
 * size the header states is the file's real size (RPM_SIZE_MISMATCH otherwise): repodata with a
 * wrong `size package` makes dnf refuse the download.
 */
export async function readRpmFile(
  path: string,
  options: Omit<ReadHeaderOptions, "fileSize"> = {},
): Promise<RpmPackage> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, "r");
  } catch (cause) {
    throw new ReposyncError("IO_ERROR", `cannot open ${path}`, { cause });
  }
  try {
    const { size } = await handle.stat();
    const read: RangeReader = async (start, end) => {
      const length = Math.max(0, Math.min(end, size) - start);
      const buffer = Buffer.alloc(length);
      const { bytesRead } = await handle.read(buffer, 0, length, start);
      return buffer.subarray(0, bytesRead);
    };
    const { pkg } = await readRpmHeader(read, { ...options, fileSize: size });
    return pkg;
  } catch (err) {
    if (err instanceof ReposyncError) throw err;
    throw new ReposyncError("IO_ERROR", `cannot read ${path}`, { cause: err });
  } finally {
    await handle.close();
  }
}
