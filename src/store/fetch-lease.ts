import { type Dialect, nowMs, type Queryable, type Statement, sql } from "./port.js";

/**
 * Fetch lease timing, for package cache misses shared by replicas on one Postgres database.
 * The holder renews every 10 s while it downloads; a lease lasts 30 s, so three missed renewals
 * (a crashed or frozen holder) free the package for another replica, and a waiter polling at up
 * to 2 s notices within about 32 s at worst. Rows expired for longer than a minute are garbage.
 */
export const FETCH_LEASE_MS = 30_000;
/** See FETCH_LEASE_MS. */
export const FETCH_LEASE_RENEW_MS = 10_000;
/** See FETCH_LEASE_MS. */
export const FETCH_LEASE_RECLAIM_AFTER_MS = 60_000;

/**
 * The statement that takes the lease on `key` for `owner`, returning a row when it did. One
 * statement: a missing row is inserted; an existing row is taken over only when it expired or its
 * holder marked it failed. Concurrent acquirers of one key are serialised on the row (the insert
 * of one makes the others take the conflict path and re-check the WHERE against its committed
 * row), so exactly one of them gets a row back. Call it after re-checking the cache, so a fetch
 * that completed a moment ago is not repeated.
 */
export function acquireFetchLeaseStatement(
  dialect: Dialect,
  key: string,
  owner: string,
  leaseMs = FETCH_LEASE_MS,
): Statement {
  const now = nowMs(dialect);
  return sql(
    `insert into fetch_leases as l (key, owner, expires_at, failed)
     values ($1, $2, ${now} + $3, false)
     on conflict (key) do update
       set owner = excluded.owner, expires_at = excluded.expires_at, failed = false
       where l.expires_at <= ${now} or l.failed
     returning owner`,
    key,
    owner,
    leaseMs,
  );
}

/** Runs acquireFetchLeaseStatement; resolves true when `owner` now holds the lease on `key`. */
export async function acquireFetchLease(
  db: Queryable,
  key: string,
  owner: string,
  leaseMs = FETCH_LEASE_MS,
): Promise<boolean> {
  const rows = await db.query(acquireFetchLeaseStatement(db.dialect, key, owner, leaseMs));
  return rows.length > 0;
}

/**
 * Extends the holder's lease by `leaseMs` from now. Resolves false when `owner` no longer holds
 * it (expired and taken over) or marked it failed; the download may go on, but others may
 * already be fetching too.
 */
export async function renewFetchLease(
  db: Queryable,
  key: string,
  owner: string,
  leaseMs = FETCH_LEASE_MS,
): Promise<boolean> {
  const n = await db.exec(
    sql(
      `update fetch_leases set expires_at = ${nowMs(db.dialect)} + $3
       where key = $1 and owner = $2 and not failed`,
      key,
      owner,
      leaseMs,
    ),
  );
  return n > 0;
}

/** Deletes the lease once the package is stored; only the owner's row is deleted. */
export async function releaseFetchLease(
  db: Queryable,
  key: string,
  owner: string,
): Promise<boolean> {
  return (
    (await db.exec(sql("delete from fetch_leases where key = $1 and owner = $2", key, owner))) > 0
  );
}

/**
 * Marks the owner's lease failed: waiters stop waiting and fetch for themselves (in parallel, so
 * a hanging upstream costs each replica one timeout, not one per replica in line), and the next
 * acquirer takes the row over at once instead of after expiry.
 */
export async function markFetchLeaseFailed(
  db: Queryable,
  key: string,
  owner: string,
): Promise<boolean> {
  const n = await db.exec(
    sql("update fetch_leases set failed = true where key = $1 and owner = $2", key, owner),
  );
  return n > 0;
}

/** A lease as a waiter sees it. */
export interface FetchLease {
  readonly owner: string;
  readonly expiresAt: number;
  readonly failed: boolean;
  /** Held, not failed and not expired, by the database clock: keep waiting. */
  readonly live: boolean;
}

interface LeaseRow {
  [key: string]: unknown;
  owner: string;
  expires_at: number;
  failed: boolean | number;
  db_now: number;
}

/** The lease on `key`, or undefined when there is none (the holder finished, or never was). */
export async function readFetchLease(db: Queryable, key: string): Promise<FetchLease | undefined> {
  const rows = await db.query<LeaseRow>(
    sql(
      `select owner, expires_at, failed, ${nowMs(db.dialect)} as db_now
       from fetch_leases where key = $1`,
      key,
    ),
  );
  const r = rows[0];
  if (r === undefined) return undefined;
  const failed = Boolean(r.failed);
  const expiresAt = Number(r.expires_at);
  return { owner: r.owner, expiresAt, failed, live: !failed && expiresAt > Number(r.db_now) };
}

/**
 * Deletes leases expired for more than `olderThanMs` (failed ones included, once expired);
 * resolves to how many. A live lease is never touched, and a row taken over between the
 * check and the delete is safe: the takeover moved expires_at into the future.
 */
export async function reclaimFetchLeases(
  db: Queryable,
  olderThanMs = FETCH_LEASE_RECLAIM_AFTER_MS,
): Promise<number> {
  return db.exec(
    sql(`delete from fetch_leases where expires_at <= ${nowMs(db.dialect)} - $1`, olderThanMs),
  );
}
