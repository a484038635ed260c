import type { Clock } from "../github/clock.js";
import { reclaimFetchLeases } from "../store/fetch-lease.js";
import type { Queryable } from "../store/port.js";

/** How often a replica deletes long-expired fetch lease rows. */
export const FETCH_LEASE_RECLAIM_EVERY_MS = 5 * 60_000;

/** A running reclaim loop. */
export interface FetchLeaseReclaimer {
  /** Ends the loop; resolves once no reclaim is in flight. */
  stop(): Promise<void>;
}

/** Inputs of startReclaiming. */
export interface ReclaimOptions {
  readonly db: Queryable;
  readonly clock: Clock;
  readonly everyMs?: number;
  /** A reclaim failed (it is tried again next period). */
  readonly onError?: (err: unknown) => void;
  /** A reclaim deleted `count` rows (for tests and logs). */
  readonly onReclaimed?: (count: number) => void;
}

/**
 * Deletes expired fetch lease rows now and then every `everyMs` (5 min). Rows only outlive their
 * use when a holder crashed, or when a failed lease was never taken over because its waiters
 * fetched for themselves; either way nothing waits on them any more, so a periodic sweep is
 * enough, and it keeps the lease statements themselves at one query each (no cleanup piggybacked
 * on a miss). Every replica sweeps; the delete is idempotent and touches only rows expired for
 * over a minute by the database clock, so sweeps of several replicas never disturb a live lease.
 */
export function startReclaiming(options: ReclaimOptions): FetchLeaseReclaimer {
  const stopper = new AbortController();
  const everyMs = options.everyMs ?? FETCH_LEASE_RECLAIM_EVERY_MS;
  const loop = (async () => {
    for (;;) {
      try {
        // Not inside `onReclaimed?.(…)`: an optional call skips evaluating its arguments.
        const count = await reclaimFetchLeases(options.db);
        options.onReclaimed?.(count);
      } catch (err) {
        options.onError?.(err);
      }
      try {
        await options.clock.sleep(everyMs, stopper.signal);
      } catch {
        return;
      }
    }
  })();
  return {
    async stop() {
      stopper.abort();
      await loop;
    },
  };
}
