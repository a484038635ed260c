import { createHash } from "node:crypto";
import type { Clock } from "../github/clock.js";
import type { Queryable } from "../store/port.js";
import type { Remote } from "../store/remote-input.js";
import { findRemote } from "../store/remotes.js";
import { findSnapshotFile, latestSnapshot, type StoredSnapshot } from "../store/snapshots.js";

/** A snapshot as the server sends it: repomd.xml and its strong validator. */
export interface ServedSnapshot extends StoredSnapshot {
  /** `"<sha256 of repomd.xml>"`. */
  readonly etag: string;
  /** createdAt as an HTTP date, made once rather than per request. */
  readonly lastModified: string;
}

export interface RepoReaderOptions {
  readonly db: Queryable;
  readonly clock: Clock;
  /**
   * How long a remote row and its current snapshot are reused before the database is asked
   * again (1 s). See the class comment for why a second is the right order.
   */
  readonly freshMs?: number;
  /** How long a repodata file's bytes are reused (60 s); they never change under one name. */
  readonly fileMs?: number;
  /** The most bytes of repodata files kept in memory (64 MiB); past it the oldest go first. */
  readonly maxFileBytes?: number;
}

interface Entry<T> {
  readonly value: Promise<T>;
  readonly until: number;
  /** The value once the read has resolved, for the synchronous peek. */
  settled?: { readonly value: T };
}

/** A value known now, without waiting; undefined when the memory has nothing fresh. */
export type Peeked<T> = { readonly value: T } | undefined;

/**
 * The server's reads of remotes, snapshots and repodata files, with a short memory.
 *
 * repomd.xml is what every dnf on every machine asks for on each `makecache`, so a busy server
 * would otherwise run a query per request for an answer that changes a few times an hour. The
 * remote and its snapshot are reused for `freshMs` (1 s): a new snapshot shows up at most a
 * second late on this replica, far below what any client notices (dnf's own metadata_expire
 * is minutes). A repodata file is named by its sha256, so its bytes under one name never
 * change; it is reused for `fileMs` (60 s), which bounds how long a file stays served after its
 * grace hour ended or its remote was removed. Concurrent misses of one key share one query.
 */
export class RepoReader {
  private readonly db: Queryable;
  private readonly clock: Clock;
  private readonly freshMs: number;
  private readonly fileMs: number;
  private readonly maxFileBytes: number;
  private readonly remotes = new Map<string, Entry<Remote | undefined>>();
  private readonly snapshots = new Map<string, Entry<ServedSnapshot | undefined>>();
  private readonly files = new Map<string, Entry<Buffer | undefined>>();
  private readonly fileSizes = new Map<string, number>();
  private fileBytes = 0;

  constructor(options: RepoReaderOptions) {
    this.db = options.db;
    this.clock = options.clock;
    this.freshMs = options.freshMs ?? 1000;
    this.fileMs = options.fileMs ?? 60_000;
    this.maxFileBytes = options.maxFileBytes ?? 64 * 1024 * 1024;
  }

  /** The remote called `name`, or undefined. */
  remote(name: string): Promise<Remote | undefined> {
    return this.cached(this.remotes, name, this.freshMs, () => findRemote(this.db, name));
  }

  /**
   * The current snapshot of `remote`, or undefined while it is cold. `fresh` skips the memory:
   * a cold wait must see a snapshot the moment it lands.
   */
  snapshot(remote: string, options: { fresh?: boolean } = {}): Promise<ServedSnapshot | undefined> {
    if (options.fresh) this.snapshots.delete(remote);
    return this.cached(this.snapshots, remote, this.freshMs, async () => {
      const s = await latestSnapshot(this.db, remote);
      if (s === undefined) return undefined;
      return {
        ...s,
        etag: `"${createHash("sha256").update(s.repomd).digest("hex")}"`,
        lastModified: new Date(s.createdAt).toUTCString(),
      };
    });
  }

  /** The bytes of repodata file `name` of `remote` (current or in its grace hour), or undefined. */
  async file(remote: string, name: string): Promise<Buffer | undefined> {
    const key = `${remote}/${name}`;
    const bytes = await this.cached(this.files, key, this.fileMs, () =>
      findSnapshotFile(this.db, remote, name, this.clock.now()),
    );
    if (bytes === undefined) {
      this.dropFile(key);
      return undefined;
    }
    if (!this.fileSizes.has(key)) {
      this.fileSizes.set(key, bytes.length);
      this.fileBytes += bytes.length;
      // Keeps the memory under maxFileBytes by dropping the oldest entries (Map order).
      for (const k of [...this.files.keys()]) {
        if (this.fileBytes <= this.maxFileBytes) break;
        if (k !== key) this.dropFile(k);
      }
    }
    return bytes;
  }

  /**
   * The remote and its current snapshot when both are in memory and fresh, without waiting:
   * the hot path of repomd.xml, which then answers in the same tick as the request came in.
   */
  peekSnapshot(remote: string): Peeked<{ remote: Remote; snapshot: ServedSnapshot }> {
    const r = this.peek(this.remotes, remote)?.value;
    const s = this.peek(this.snapshots, remote)?.value;
    return r && s ? { value: { remote: r, snapshot: s } } : undefined;
  }

  /** A repodata file's bytes when in memory, without waiting (only for a known remote). */
  peekFile(remote: string, name: string): Peeked<Buffer> {
    if (!this.peek(this.remotes, remote)?.value) return undefined;
    const bytes = this.peek(this.files, `${remote}/${name}`)?.value;
    return bytes ? { value: bytes } : undefined;
  }

  private peek<T>(map: Map<string, Entry<T>>, key: string): Peeked<T> {
    const entry = map.get(key);
    return entry && entry.until > this.clock.now() ? entry.settled : undefined;
  }

  /** Forgets what is known of `remote` (after the admin API added or removed it). */
  forget(remote: string): void {
    this.remotes.delete(remote);
    this.snapshots.delete(remote);
    for (const key of [...this.files.keys()]) {
      if (key.startsWith(`${remote}/`)) this.dropFile(key);
    }
  }

  private dropFile(key: string): void {
    this.files.delete(key);
    const size = this.fileSizes.get(key);
    if (size !== undefined) {
      this.fileBytes -= size;
      this.fileSizes.delete(key);
    }
  }

  private cached<T>(
    map: Map<string, Entry<T>>,
    key: string,
    ttl: number,
    load: () => Promise<T>,
  ): Promise<T> {
    const now = this.clock.now();
    const hit = map.get(key);
    if (hit && hit.until > now) return hit.value;
    const value = load();
    const entry: Entry<T> = { value, until: now + ttl };
    map.set(key, entry);
    value.then(
      (v) => {
        entry.settled = { value: v };
      },
      // A failed read is not remembered: the next request asks the database again.
      () => {
        if (map.get(key) === entry) map.delete(key);
      },
    );
    return value;
  }
}
