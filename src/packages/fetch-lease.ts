import { ReposyncError } from "../errors.js";
import { type Clock, systemClock } from "../github/clock.js";
import {
  acquireFetchLease,
  FETCH_LEASE_MS,
  FETCH_LEASE_RENEW_MS,
  markFetchLeaseFailed,
  readFetchLease,
  releaseFetchLease,
  renewFetchLease,
} from "../store/fetch-lease.js";
import type { Queryable } from "../store/port.js";
import type { AcquireContext } from "./coalesce.js";
import { type FetchLeaseReclaimer, startReclaiming } from "./fetch-lease-reclaim.js";

/** First poll of a waiting replica, doubled after each poll up to FETCH_LEASE_POLL_MAX_MS. */
export const FETCH_LEASE_POLL_MIN_MS = 50;
/** See FETCH_LEASE_POLL_MIN_MS. */
export const FETCH_LEASE_POLL_MAX_MS = 2_000;

/**
 * How a wait on another replica's lease ended, the `kind` of `reposync_fetch_lease_waits_total`:
 * - `served`: the package appeared in the shared store and was served from there;
 * - `failed`: the holder marked its fetch failed, so this replica fetched at once itself;
 * - `expired`: the holder stopped renewing (crashed or frozen); this replica went for the lease;
 * - `released`: the lease went away without the package appearing; this replica went for it;
 * - `error`: a lease query failed, so this replica fetched without a lease;
 * - `aborted`: the fetch's own timeout (or shutdown) ended the wait.
 */
export type FetchLeaseWaitKind = "served" | "failed" | "expired" | "released" | "error" | "aborted";

/** Where lease trouble is reported; pino's logger fits. */
export interface FetchLeaseLogger {
  warn(obj: object, msg: string): void;
}

/** Inputs of {@link FetchLeases}. */
export interface FetchLeasesOptions {
  /** The shared Postgres database. */
  readonly db: Queryable;
  /** This process's lease owner id, unique among replicas (the syncer's newOwnerId() fits). */
  readonly owner: string;
  /** Paces polls, renewals and reclaims; expiry itself is judged by the database clock. */
  readonly clock?: Clock;
  readonly logger?: FetchLeaseLogger;
  /** A wait on another replica ended (the metric `reposync_fetch_lease_waits_total{kind}`). */
  readonly onWait?: (kind: FetchLeaseWaitKind) => void;
  readonly leaseMs?: number;
  readonly renewMs?: number;
  readonly pollMinMs?: number;
  readonly pollMaxMs?: number;
  /** How often start() reclaims expired rows (5 min). */
  readonly reclaimEveryMs?: number;
}

/**
 * The fetch leases of a process, or undefined: the one place that decides who uses them.
 * Only replicas sharing a Postgres database need them. On SQLite the database is one file on
 * one machine, so there is at most one serving process and its in-process coalescing already
 * fetches each package once; a lease query there would be pure cost on every miss.
 *
 *     const leases = fetchLeasesFor({ db, owner, logger, onWait });
 *     new PackageCache({ store, fetchUpstream, ...(leases ? { acquire: leases.acquire } : {}) });
 */
export function fetchLeasesFor(options: FetchLeasesOptions): FetchLeases | undefined {
  return options.db.dialect === "postgres" ? new FetchLeases(options) : undefined;
}

type WaitOutcome<T> =
  | { readonly kind: "served"; readonly value: T }
  | { readonly kind: "failed" | "expired" | "released" }
  | { readonly kind: "error"; readonly error: unknown };

/**
 * The package cache's acquire step across replicas sharing one Postgres database and one
 * package store: of the replicas missing a package at once, one downloads it and the others
 * wait for it to appear in the store.
 *
 * `acquire` runs as the coalescer's leader step, after the in-process recheck, so a cache hit
 * never reaches it (no lease query) and all the callers of one replica share one lease attempt
 * and one poll loop. It takes the lease with one statement; the holder rechecks the store once
 * more (a replica that stored and released between our recheck and our insert must not be
 * repeated), renews every 10 s while it downloads, deletes the row once the package is stored,
 * and marks it failed when the fetch fails. A replica that finds the lease held polls the store,
 * 50 ms doubling to 2 s, reading the lease row only when the package is not there yet.
 *
 * When the holder marks its lease failed, every replica waiting on it fetches at once, without
 * taking the lease over: if one of them took it, the others would find a live lease and wait
 * for that second attempt, so against an upstream that hangs until timeout a client on the k-th
 * replica in line would wait k timeouts. Fetching in parallel costs each replica one attempt,
 * as without leases. The failed row stays until a later miss takes it over or it is reclaimed.
 *
 * Every wait runs under the fetch's own signal (detached from clients, bounded by the fetch
 * timeout), never a client's, so the caller that led may leave without cancelling the others.
 * A lease query that fails is logged and the fetch goes on without a lease: the database being
 * away must not take package downloads down with it; the cost is at worst a duplicate download.
 */
export class FetchLeases {
  private readonly clock: Clock;
  private readonly leaseMs: number;
  private readonly renewMs: number;
  private readonly pollMinMs: number;
  private readonly pollMaxMs: number;
  private reclaimer: FetchLeaseReclaimer | undefined;

  constructor(private readonly options: FetchLeasesOptions) {
    if (options.db.dialect !== "postgres") {
      throw new ReposyncError("USAGE", "fetch leases are for replicas sharing a Postgres database");
    }
    this.clock = options.clock ?? systemClock;
    this.leaseMs = options.leaseMs ?? FETCH_LEASE_MS;
    this.renewMs = options.renewMs ?? FETCH_LEASE_RENEW_MS;
    this.pollMinMs = options.pollMinMs ?? FETCH_LEASE_POLL_MIN_MS;
    this.pollMaxMs = options.pollMaxMs ?? FETCH_LEASE_POLL_MAX_MS;
  }

  /**
   * Starts reclaiming expired rows: once now and then every `reclaimEveryMs`. Leases work
   * without it; it only keeps rows of crashed holders (and failed rows nobody took over) from
   * piling up. Idempotent.
   */
  start(): void {
    this.reclaimer ??= startReclaiming({
      db: this.options.db,
      clock: this.clock,
      ...(this.options.reclaimEveryMs !== undefined
        ? { everyMs: this.options.reclaimEveryMs }
        : {}),
      onError: (err) => this.warn(err, "reclaiming expired fetch leases failed"),
    });
  }

  /** Stops reclaiming; resolves once no reclaim is in flight. Idempotent. */
  async stop(): Promise<void> {
    await this.reclaimer?.stop();
  }

  /** The acquire step for PackageCache (see the class comment). */
  readonly acquire: <T>(context: AcquireContext<T>) => Promise<T> = (context) => this.run(context);

  private async run<T>(context: AcquireContext<T>): Promise<T> {
    // The coalescing key (digest and size) is short and already names exactly the bytes, so it
    // is the row's key as it is; the prefix leaves room for other kinds of fetches.
    const key = `package:${context.key}`;
    for (;;) {
      context.signal.throwIfAborted();
      let taken: boolean;
      try {
        taken = await acquireFetchLease(this.options.db, key, this.options.owner, this.leaseMs);
      } catch (err) {
        this.warn(err, "taking a fetch lease failed; fetching without one", key);
        return context.fetch(context.signal);
      }
      if (taken) return this.hold(context, key);

      let outcome: WaitOutcome<T>;
      try {
        outcome = await this.waitForHolder(context, key);
      } catch (err) {
        if (context.signal.aborted) this.options.onWait?.("aborted");
        throw err;
      }
      this.options.onWait?.(outcome.kind);
      switch (outcome.kind) {
        case "served":
          return outcome.value;
        case "error":
          this.warn(outcome.error, "reading a fetch lease failed; fetching without one", key);
          return context.fetch(context.signal);
        case "failed":
          return context.fetch(context.signal);
        case "expired":
        case "released":
          continue;
      }
    }
  }

  /** The holder's part: recheck, fetch under renewal, then release or mark failed. */
  private async hold<T>(context: AcquireContext<T>, key: string): Promise<T> {
    const renewing = this.keepRenewing(key);
    let stored = false;
    try {
      const value = (await context.recheck()) ?? (await context.fetch(context.signal));
      stored = true;
      return value;
    } finally {
      await renewing.stop();
      const { db, owner } = this.options;
      // Awaited, not fired and forgotten: the coalescer's settled() (and so the cache's stop())
      // then covers it, and waiters learn of a failure as soon as the database has it.
      await (stored ? releaseFetchLease(db, key, owner) : markFetchLeaseFailed(db, key, owner))
        .then((held) => {
          if (!held) this.warn(undefined, "the fetch lease had passed to another replica", key);
        })
        .catch((err: unknown) =>
          this.warn(
            err,
            stored ? "releasing a fetch lease failed" : "marking a fetch lease failed",
            key,
          ),
        );
    }
  }

  /**
   * Renews every `renewMs` until stopped. A renewal that finds the lease gone (taken over after
   * it expired) or failing on the database is only logged: the download goes on, since its bytes
   * are what every waiter needs, and a second replica fetching too costs only a duplicate.
   */
  private keepRenewing(key: string): { stop(): Promise<void> } {
    const stopper = new AbortController();
    const loop = (async () => {
      for (;;) {
        try {
          await this.clock.sleep(this.renewMs, stopper.signal);
        } catch {
          return;
        }
        try {
          const held = await renewFetchLease(
            this.options.db,
            key,
            this.options.owner,
            this.leaseMs,
          );
          if (!held)
            this.warn(undefined, "the fetch lease passed to another replica mid-download", key);
        } catch (err) {
          this.warn(err, "renewing a fetch lease failed", key);
        }
      }
    })();
    return {
      stop: async () => {
        stopper.abort();
        await loop;
      },
    };
  }

  /**
   * Polls the store until the package appears or the lease stops being live. The store is
   * looked at first because it is the answer and costs no query; the lease row is read only on
   * a miss, to learn whether waiting still makes sense. A row gone while the package is still
   * missing is checked against the store once more: the holder stores before it deletes, so a
   * poll that missed the file just before the delete finds it now.
   */
  private async waitForHolder<T>(context: AcquireContext<T>, key: string): Promise<WaitOutcome<T>> {
    let delay = this.pollMinMs;
    for (;;) {
      await this.clock.sleep(delay, context.signal);
      delay = Math.min(delay * 2, this.pollMaxMs);
      const stored = await context.recheck();
      if (stored !== undefined) return { kind: "served", value: stored };
      let lease: Awaited<ReturnType<typeof readFetchLease>>;
      try {
        lease = await readFetchLease(this.options.db, key);
      } catch (error) {
        return { kind: "error", error };
      }
      if (lease === undefined) {
        const late = await context.recheck();
        return late !== undefined ? { kind: "served", value: late } : { kind: "released" };
      }
      if (lease.failed) return { kind: "failed" };
      if (!lease.live) return { kind: "expired" };
    }
  }

  private warn(err: unknown, msg: string, key?: string): void {
    this.options.logger?.warn(
      {
        ...(key !== undefined ? { key } : {}),
        ...(err !== undefined ? { err: err instanceof Error ? err.message : String(err) } : {}),
      },
      msg,
    );
  }
}
