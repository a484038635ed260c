import type { Clock } from "../github/clock.js";

export interface ColdWaitOptions<T> {
  /** Asks this process's syncer for a prime of `remote` (deduplicated by its queue). */
  readonly enqueuePrime: (remote: string) => void;
  /** Reads the remote's snapshot from the database, bypassing any memory. */
  readonly load: (remote: string) => Promise<T | undefined>;
  /** REPOSYNC_COLD_WAIT: how long one request waits in all (10 s). */
  readonly waitMs: number;
  /**
   * How often a waiter looks again without being told (250 ms). A sync in this process wakes
   * the waiters at once through notify(); the poll is for a snapshot written by another
   * replica (whose syncer held the lease), which no event of ours announces.
   */
  readonly pollMs?: number;
  readonly clock: Clock;
}

/** How a cold wait ended: the snapshot, the wait's end, or a failed first sync here. */
export type ColdWaitResult<T> =
  | { readonly kind: "ready"; readonly snapshot: T }
  | { readonly kind: "timeout" }
  | { readonly kind: "failed"; readonly reason: string };

/**
 * Bounded waits for cold remotes (no snapshot yet). A request enqueues a prime and waits until
 * the snapshot lands or `waitMs` has passed, whichever is first, and never longer: the caller
 * answers 503 with Retry-After then, so dnf retries instead of hanging on a slow first scan.
 * Any number of requests may wait for one remote; the queue turns their enqueues into one job.
 */
export class ColdWait<T> {
  private readonly pollMs: number;
  private readonly wakers = new Map<string, Set<() => void>>();
  // The last sync of a remote that ended in error in this process, and when. A waiter that
  // began before it has nothing left to wait for: the next attempt is another request's prime.
  private readonly failures = new Map<string, { readonly reason: string; readonly at: number }>();

  constructor(private readonly options: ColdWaitOptions<T>) {
    this.pollMs = options.pollMs ?? 250;
  }

  /**
   * Tells the waiters of `remote` to look now (a sync of it just ended here). With `failure`,
   * that sync failed: waiters that find no snapshot end at once instead of waiting out
   * `waitMs` for a sync that is not coming, and their clients learn why.
   */
  notify(remote: string, failure?: string): void {
    if (failure === undefined) this.failures.delete(remote);
    else this.failures.set(remote, { reason: failure, at: this.options.clock.now() });
    const set = this.wakers.get(remote);
    if (!set) return;
    for (const wake of set) wake();
  }

  /** Waiters now (for tests and the index page). */
  waiting(remote: string): number {
    return this.wakers.get(remote)?.size ?? 0;
  }

  /**
   * The snapshot of `remote` once it exists; `timeout` when `waitMs` passed first or `signal`
   * (the client leaving, or shutdown) aborted the wait; `failed` when a sync of it here ended
   * in error after the wait began and left no snapshot.
   */
  async wait(remote: string, signal?: AbortSignal): Promise<ColdWaitResult<T>> {
    const { clock, load, waitMs } = this.options;
    const started = clock.now();
    const deadline = started + waitMs;
    this.options.enqueuePrime(remote);
    for (;;) {
      const found = await load(remote);
      if (found !== undefined) return { kind: "ready", snapshot: found };
      const failure = this.failures.get(remote);
      if (failure !== undefined && failure.at >= started) {
        return { kind: "failed", reason: failure.reason };
      }
      const left = deadline - clock.now();
      if (left <= 0 || signal?.aborted) return { kind: "timeout" };
      await this.pause(remote, Math.min(this.pollMs, left), signal);
    }
  }

  /** Sleeps `ms`, or less when notified or aborted; never rejects. */
  private async pause(remote: string, ms: number, signal: AbortSignal | undefined): Promise<void> {
    const stop = new AbortController();
    const wake = () => stop.abort();
    let set = this.wakers.get(remote);
    if (!set) {
      set = new Set();
      this.wakers.set(remote, set);
    }
    set.add(wake);
    signal?.addEventListener("abort", wake, { once: true });
    try {
      await this.options.clock.sleep(ms, stop.signal).catch(() => {});
    } finally {
      signal?.removeEventListener("abort", wake);
      set.delete(wake);
      if (set.size === 0) this.wakers.delete(remote);
    }
  }
}
