import { createHash, randomBytes } from "node:crypto";
import { mkdir, open, readdir, rename, stat, unlink } from "node:fs/promises";
import * as path from "node:path";
import { ReposyncError } from "../errors.js";

/** A package file in the store. Each caller opens its own reader on `path`. */
export interface StoredPackage {
  /** Lower-case hex sha256 of the file. */
  readonly sha256: string;
  readonly path: string;
  readonly size: number;
}

/** Bytes to store: a web stream (a fetch body) or any async iterable of chunks (a file stream). */
export type PackageBytes = AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>;

export interface ContentStoreOptions {
  /** The store's root, `<dataDir>/packages`; files live under `sha256/ab/<hex>` in it. */
  readonly root: string;
  /** How old (by mtime) a temporary file must be before startup cleanup removes it (1 h). */
  readonly staleTempMs?: number;
  /** Epoch milliseconds, for the staleness judgement (Date.now). */
  readonly now?: () => number;
}

const SHA256_HEX = /^[0-9a-f]{64}$/;
/** Temporary files start with a dot, so they can never be taken for a 64-hex final name. */
const TEMP_PREFIX = ".tmp-";

/**
 * The lower-case form of a hex sha256. Anything else is refused, so a digest can never name a
 * path outside the store (no `/`, no `..`, no empty string).
 */
export function normaliseSha256(sha256: string): string {
  const hex = sha256.toLowerCase();
  if (!SHA256_HEX.test(hex)) {
    throw new ReposyncError("USAGE", `not a sha256: ${JSON.stringify(sha256.slice(0, 80))}`);
  }
  return hex;
}

/**
 * Content-addressed package files under `<root>/sha256/ab/<hex>`. A file is only ever visible
 * under its name once its bytes were hashed and counted while written, synced to disk, and found
 * to be exactly what the name says: `put` writes a temporary file beside the final one (same
 * folder, so same file system, so `rename` is atomic) and renames it into place. Readers therefore
 * never see a partial or wrong file, and two writers of one digest (two replicas sharing the
 * store) are harmless: both renames put identical bytes at the same name.
 */
export class ContentStore {
  readonly root: string;
  private readonly staleTempMs: number;
  private readonly now: () => number;

  constructor(options: ContentStoreOptions) {
    this.root = path.resolve(options.root);
    this.staleTempMs = options.staleTempMs ?? 60 * 60_000;
    this.now = options.now ?? Date.now;
  }

  /** The store of a data directory: `<dataDir>/packages`. */
  static inDataDir(dataDir: string, options: Omit<ContentStoreOptions, "root"> = {}): ContentStore {
    return new ContentStore({ ...options, root: path.join(dataDir, "packages") });
  }

  /** Where the file of `sha256` lives (whether or not it exists). */
  pathFor(sha256: string): string {
    const hex = normaliseSha256(sha256);
    return path.join(this.root, "sha256", hex.slice(0, 2), hex);
  }

  /** True when the file of `sha256` is stored. */
  async has(sha256: string): Promise<boolean> {
    return (await this.open(sha256)) !== undefined;
  }

  /** The stored file of `sha256`, or undefined. A lookup only: no reader is opened. */
  async open(sha256: string): Promise<StoredPackage | undefined> {
    const hex = normaliseSha256(sha256);
    const file = this.pathFor(hex);
    try {
      const s = await stat(file);
      return s.isFile() ? { sha256: hex, path: file, size: s.size } : undefined;
    } catch (err) {
      if (isCode(err, "ENOENT")) return undefined;
      throw ioError(`looking up ${file}`, err);
    }
  }

  /**
   * Streams `source` into the store as the file of `sha256`, which must be `size` bytes. Bytes
   * that do not match (a different digest, too few or too many bytes) throw UPSTREAM_MISMATCH
   * and leave nothing behind; so does any failure of the source or the disk. Reading stops as
   * soon as the source is longer than `size`, and a web stream is cancelled on failure, so a
   * wrong upstream is not downloaded to its end.
   */
  async put(
    sha256: string,
    size: number,
    source: PackageBytes,
    signal?: AbortSignal,
  ): Promise<StoredPackage> {
    const hex = normaliseSha256(sha256);
    if (!Number.isSafeInteger(size) || size < 0) {
      throw new ReposyncError("USAGE", `not a package size: ${size}`);
    }
    const final = this.pathFor(hex);
    const dir = path.dirname(final);
    const temp = path.join(
      dir,
      `${TEMP_PREFIX}${hex}-${process.pid}-${randomBytes(6).toString("hex")}`,
    );
    await mkdir(dir, { recursive: true }).catch((err: unknown) => {
      throw ioError(`creating ${dir}`, err);
    });
    const handle = await open(temp, "wx").catch((err: unknown) => {
      throw ioError(`creating ${temp}`, err);
    });
    let closed = false;
    try {
      const hash = createHash("sha256");
      let written = 0;
      for await (const chunk of chunksOf(source)) {
        signal?.throwIfAborted();
        written += chunk.length;
        if (written > size) {
          throw new ReposyncError(
            "UPSTREAM_MISMATCH",
            `${hex}: upstream sent more than the ${size} bytes expected`,
          );
        }
        hash.update(chunk);
        await handle.write(chunk).catch((err: unknown) => {
          throw ioError(`writing ${temp}`, err);
        });
      }
      const digest = hash.digest("hex");
      if (written !== size || digest !== hex) {
        throw new ReposyncError(
          "UPSTREAM_MISMATCH",
          written !== size
            ? `${hex}: upstream sent ${written} bytes, expected ${size}`
            : `${hex}: upstream bytes hash to ${digest}`,
        );
      }
      // Durable before visible: after a crash, a name in the store still means whole bytes.
      await handle.sync().catch((err: unknown) => {
        throw ioError(`syncing ${temp}`, err);
      });
      closed = true;
      await handle.close();
      await rename(temp, final).catch((err: unknown) => {
        throw ioError(`renaming ${temp} into place`, err);
      });
      await syncDirectory(dir);
      return { sha256: hex, path: final, size };
    } catch (err) {
      if (!closed) await handle.close().catch(() => {});
      await unlink(temp).catch(() => {});
      throw err;
    }
  }

  /**
   * Removes temporary files older than `staleTempMs`: what a crashed or killed writer left. A
   * younger one may belong to a download still running in another process sharing the store,
   * and a live download touches its file at every chunk, so age by mtime tells them apart.
   * Resolves to how many were removed.
   */
  async removeStaleTemps(): Promise<number> {
    const base = path.join(this.root, "sha256");
    let removed = 0;
    const prefixes = await readdir(base).catch((err: unknown) => {
      if (isCode(err, "ENOENT")) return [] as string[];
      throw ioError(`listing ${base}`, err);
    });
    for (const prefix of prefixes) {
      const dir = path.join(base, prefix);
      const names = await readdir(dir).catch(() => [] as string[]);
      for (const name of names) {
        if (!name.startsWith(TEMP_PREFIX)) continue;
        const file = path.join(dir, name);
        const s = await stat(file).catch(() => undefined);
        if (!s || this.now() - s.mtimeMs < this.staleTempMs) continue;
        await unlink(file).then(
          () => removed++,
          () => {},
        );
      }
    }
    return removed;
  }
}

async function* chunksOf(source: PackageBytes): AsyncGenerator<Uint8Array> {
  if (!isWebStream(source)) {
    yield* source;
    return;
  }
  const reader = source.getReader();
  let done = false;
  try {
    for (;;) {
      const next = await reader.read();
      if (next.done) {
        done = true;
        return;
      }
      yield next.value;
    }
  } finally {
    // Stopped early (mismatch, abort, disk error): tell upstream to stop sending.
    if (!done) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}

function isWebStream(source: PackageBytes): source is ReadableStream<Uint8Array> {
  return typeof (source as ReadableStream<Uint8Array>).getReader === "function";
}

/** Makes the rename itself durable; some file systems refuse to open a directory, which is fine. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, "r").catch(() => undefined);
  if (!handle) return;
  await handle.sync().catch(() => {});
  await handle.close().catch(() => {});
}

function isCode(err: unknown, code: string): boolean {
  return (err as { code?: unknown } | null)?.code === code;
}

function ioError(what: string, err: unknown): ReposyncError {
  const detail = err instanceof Error ? err.message : String(err);
  return new ReposyncError("IO_ERROR", `${what}: ${detail}`, { cause: err });
}
