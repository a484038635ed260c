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

/**
 * Bounded waits for cold remotes (no snapshot yet). A request enqueues a prime and waits until
 * the snapshot lands or `waitMs` has passed, whichever is first, and never longer: the caller
 * answers 503 with Retry-After then, so dnf retries instead of hanging on a slow first scan.
 * Any number of requests may wait for one remote; the queue turns their enqueues into one job.
 */
export class ColdWait<T> {
  private readonly pollMs: number;
  private readonly wakers = new Map<string, Set<() => void>>();

  constructor(private readonly options: ColdWaitOptions<T>) {
    this.pollMs = options.pollMs ?? 250;
  }

  /** Tells the waiters of `remote` to look now (a sync of it just ended here). */
  notify(remote: string): void {
    const set = this.wakers.get(remote);
    if (!set) return;
    for (const wake of set) wake();
  }

  /** Waiters now (for tests and the index page). */
  waiting(remote: string): number {
    return this.wakers.get(remote)?.size ?? 0;
  }

  /**
   * The snapshot of `remote` once it exists, or undefined when `waitMs` passed first or
   * `signal` (the client leaving, or shutdown) aborted the wait.
   */
  async wait(remote: string, signal?: AbortSignal): Promise<T | undefined> {
    const { clock, load, waitMs } = this.options;
    const deadline = clock.now() + waitMs;
    this.options.enqueuePrime(remote);
    for (;;) {
      const found = await load(remote);
      if (found !== undefined) return found;
      const left = deadline - clock.now();
      if (left <= 0 || signal?.aborted) return undefined;
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
