/** A pending sync of one remote. */
export interface SyncJob {
  readonly remote: string;
  /** Skip the recency gate; merged with OR when the remote is enqueued again. */
  readonly prime: boolean;
  /** The newest request mark this job answers (database clock), if any. */
  readonly requestedAt: number | null;
}

/**
 * The syncer's queue: at most one pending job per remote, however often the remote is enqueued
 * (a scheduler tick, a request poll and a cold HTTP request may all ask within a second; one
 * scan answers them all). A remote may have one job running and one pending: a request that
 * arrives mid-scan may concern a release the running scan listed too early, so it gets its own
 * scan afterwards. A pending job is not handed out while its remote's job runs: the second one
 * would only find the lease taken.
 *
 * Hand-written rather than a job-queue library: those persist jobs or poll on timers, and this
 * is forty lines of in-memory bookkeeping whose coalescing rule is the point.
 */
export class SyncQueue {
  private readonly pending = new Map<string, SyncJob>();
  private readonly running = new Set<string>();
  private waiters: (() => void)[] = [];

  /**
   * Adds a job for `remote`, or merges into its pending one. Resolves nothing; returns true when
   * a new pending job was created, false when it was merged.
   */
  enqueue(remote: string, options: { prime?: boolean; requestedAt?: number | null } = {}): boolean {
    const existing = this.pending.get(remote);
    const requestedAt = options.requestedAt ?? null;
    if (existing) {
      this.pending.set(remote, {
        remote,
        prime: existing.prime || options.prime === true,
        requestedAt:
          existing.requestedAt === null || requestedAt === null
            ? (existing.requestedAt ?? requestedAt)
            : Math.max(existing.requestedAt, requestedAt),
      });
      return false;
    }
    this.pending.set(remote, { remote, prime: options.prime === true, requestedAt });
    this.wake();
    return true;
  }

  /** Pending jobs (not running ones), in the order they were first enqueued. */
  get size(): number {
    return this.pending.size;
  }

  /** Whether a job of `remote` is running now. */
  isRunning(remote: string): boolean {
    return this.running.has(remote);
  }

  /**
   * Waits for a pending job whose remote is not running, marks it running and returns it.
   * Rejects with the signal's reason when `signal` aborts first.
   */
  async take(signal: AbortSignal): Promise<SyncJob> {
    for (;;) {
      signal.throwIfAborted();
      for (const job of this.pending.values()) {
        if (this.running.has(job.remote)) continue;
        this.pending.delete(job.remote);
        this.running.add(job.remote);
        return job;
      }
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => reject(signal.reason);
        signal.addEventListener("abort", onAbort, { once: true });
        this.waiters.push(() => {
          signal.removeEventListener("abort", onAbort);
          resolve();
        });
      });
    }
  }

  /** Marks the job of `remote` finished; a pending job of the same remote may now be taken. */
  done(remote: string): void {
    this.running.delete(remote);
    this.wake();
  }

  /** Drops every pending job (at shutdown); running ones are left to finish. */
  clear(): void {
    this.pending.clear();
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
