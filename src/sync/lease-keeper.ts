import { ReposyncError } from "../errors.js";
import type { Clock } from "../github/clock.js";
import type { Queryable } from "../store/port.js";
import { renewSyncLease, SYNC_LEASE_MS, SYNC_LEASE_RENEW_MS } from "../store/sync-lease.js";

/** A running renewal loop: its signal aborts when the lease is lost or the job is stopped. */
export interface LeaseKeeper {
  /** Aborted when the outer signal aborts or the lease passed to another owner. */
  readonly signal: AbortSignal;
  /** Ends the loop; resolves once no renewal is in flight. */
  stop(): Promise<void>;
}

/** Inputs of keepLease. */
export interface KeepLeaseOptions {
  readonly db: Queryable;
  readonly clock: Clock;
  readonly remote: string;
  readonly owner: string;
  readonly leaseMs?: number;
  readonly renewMs?: number;
  /** The job's own signal (shutdown); the keeper's signal follows it. */
  readonly signal?: AbortSignal;
  readonly onError?: (err: unknown) => void;
}

/**
 * Renews the sync lease every `renewMs` (30 s) while a scan runs. A renewal that finds the lease
 * held by someone else (ours expired: the event loop stalled, the database was away for two
 * minutes) aborts the scan, since the other holder is now doing the same work. A renewal that
 * fails on a database error is only reported: the lease lasts four renewal periods, so the next
 * attempts have time to get through before anyone else may claim it.
 */
export function keepLease(options: KeepLeaseOptions): LeaseKeeper {
  const controller = new AbortController();
  const stopper = new AbortController();
  const outer = options.signal;
  const onOuter = () => controller.abort(outer?.reason);
  if (outer?.aborted) controller.abort(outer.reason);
  else outer?.addEventListener("abort", onOuter, { once: true });

  const loop = (async () => {
    for (;;) {
      try {
        await options.clock.sleep(options.renewMs ?? SYNC_LEASE_RENEW_MS, stopper.signal);
      } catch {
        return; // stopped
      }
      try {
        const held = await renewSyncLease(
          options.db,
          options.remote,
          options.owner,
          options.leaseMs ?? SYNC_LEASE_MS,
        );
        if (!held) {
          controller.abort(
            new ReposyncError(
              "CONFLICT",
              `the sync lease of ${options.remote} passed to another process`,
            ),
          );
          return;
        }
      } catch (err) {
        options.onError?.(err);
      }
    }
  })();

  return {
    signal: controller.signal,
    async stop() {
      outer?.removeEventListener("abort", onOuter);
      stopper.abort();
      await loop;
    },
  };
}
