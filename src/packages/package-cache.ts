import { ReposyncError } from "../errors.js";
import { type Clock, systemClock } from "../github/clock.js";
import { type Acquire, Coalescer, type PackageIdentity, packageKey } from "./coalesce.js";
import {
  type ContentStore,
  normaliseSha256,
  type PackageBytes,
  type StoredPackage,
} from "./content-store.js";

/** Downloads a package's bytes; the real one is {@link createGitHubUpstream} (upstream.ts). */
export type FetchUpstream<P extends PackageIdentity> = (
  pkg: P,
  signal: AbortSignal,
) => Promise<PackageBytes> | PackageBytes;

/**
 * Counters the server turns into Prometheus metrics. Every one is optional; the cache calls
 * them synchronously and ignores what they return.
 */
export interface PackageCacheMetrics {
  /** A request found its package stored (no upstream call, no database query). */
  hit?(): void;
  /** A request did not (it led or joined a fetch). */
  miss?(): void;
  /** A download from upstream started (at most one per package at a time in this process). */
  upstreamFetch?(): void;
  /** A request joined a download another request had started. */
  coalescedWait?(): void;
  /** A shared fetch failed (mismatch, upstream error, timeout). */
  fetchError?(error: unknown): void;
}

export interface PackageCacheOptions<P extends PackageIdentity> {
  readonly store: ContentStore;
  readonly fetchUpstream: FetchUpstream<P>;
  /** Bounds one shared download, whoever waits for it (10 min). */
  readonly fetchTimeoutMs?: number;
  /** How long stop() lets downloads in flight finish before aborting them (10 s). */
  readonly stopGraceMs?: number;
  /** The cross-replica step (Postgres fetch lease); default: fetch at once. */
  readonly acquire?: Acquire<StoredPackage>;
  readonly metrics?: PackageCacheMetrics;
  readonly clock?: Clock;
}

/**
 * The `cache` package mode: a package is served from the content store, and a miss is
 * downloaded once, verified against its sha256 and size, stored, and then served to everyone
 * who asked for it meanwhile (see {@link Coalescer} for how the download is shared).
 *
 * Lifecycle: start() creates the store's folders and removes what crashed writers left;
 * stop() refuses new requests, lets the downloads in flight finish for up to `stopGraceMs`
 * (a package that was almost there is worth keeping: the next start serves it as a hit), then
 * aborts the rest so shutdown is bounded, and resolves once all have settled. A download never
 * lives past stop(). Both are idempotent.
 */
export class PackageCache<P extends PackageIdentity> {
  private readonly coalescer: Coalescer<StoredPackage>;
  private readonly metrics: PackageCacheMetrics;
  private state: "new" | "started" | "stopped" = "new";
  private starting: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(private readonly options: PackageCacheOptions<P>) {
    this.metrics = options.metrics ?? {};
    this.coalescer = new Coalescer<StoredPackage>({
      fetchTimeoutMs: options.fetchTimeoutMs ?? 10 * 60_000,
      ...(options.acquire ? { acquire: options.acquire } : {}),
      ...(options.clock ? { clock: options.clock } : {}),
      onCoalescedWait: () => this.metrics.coalescedWait?.(),
      onFetchError: (_key, error) => this.metrics.fetchError?.(error),
    });
  }

  /** Downloads in flight now. */
  get inFlight(): number {
    return this.coalescer.inFlight;
  }

  /** Resolves once the downloads in flight now have ended, however they ended. */
  settled(): Promise<void> {
    return this.coalescer.settled();
  }

  /** Prepares the store; idempotent. */
  start(): Promise<void> {
    this.starting ??= this.options.store.removeStaleTemps().then(() => {
      if (this.state === "new") this.state = "started";
    });
    return this.starting;
  }

  /** See the class comment; idempotent. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.state = "stopped";
      const grace = new AbortController();
      const graceMs = this.options.stopGraceMs ?? 10_000;
      const elapsed = (this.options.clock ?? systemClock).sleep(graceMs, grace.signal);
      const finished = this.coalescer.settled();
      const first = await Promise.race([
        finished.then(() => "finished" as const),
        elapsed.then(
          () => "grace" as const,
          () => "finished" as const,
        ),
      ]);
      grace.abort();
      if (first === "grace") this.coalescer.abortAll("the package cache is stopping");
      await this.coalescer.settled();
    })();
    return this.stopping;
  }

  /**
   * The stored file of `pkg`, downloading it first on a miss. `signal` is this caller's own:
   * aborting it rejects this call with its reason (an AbortError) and nothing else; the
   * download goes on for the others and for the store. Each caller opens its own reader on the
   * returned path. Rejects with UPSTREAM_MISMATCH when upstream's bytes are not the package.
   */
  async get(pkg: P, signal?: AbortSignal): Promise<StoredPackage> {
    if (this.state === "stopped") {
      throw new ReposyncError("ABORTED", "the package cache is stopped");
    }
    signal?.throwIfAborted();
    const sha256 = normaliseSha256(pkg.sha256);
    const key = packageKey(pkg);
    const lookup = () => this.lookup(sha256, pkg.size);
    const stored = await lookup();
    if (stored) {
      this.metrics.hit?.();
      return stored;
    }
    this.metrics.miss?.();
    const { value } = await this.coalescer.run(
      key,
      {
        recheck: lookup,
        fetch: async (fetchSignal) => {
          this.metrics.upstreamFetch?.();
          const bytes = await this.options.fetchUpstream(pkg, fetchSignal);
          return this.options.store.put(sha256, pkg.size, bytes, fetchSignal);
        },
      },
      signal,
    );
    return value;
  }

  /**
   * A stored file counts only with the expected size. The digest alone names the bytes, so a
   * different size means the package's record is inconsistent, and it is left to the fetch to
   * prove it (as UPSTREAM_MISMATCH) rather than serving bytes the record does not describe.
   */
  private async lookup(sha256: string, size: number): Promise<StoredPackage | undefined> {
    const stored = await this.options.store.open(sha256);
    return stored && stored.size === size ? stored : undefined;
  }
}
