import { type Dialect, nowMs, type Queryable, type Statement, sql } from "./port.js";

/**
 * How long a sync lease lasts, and how often its holder renews it. A scan of a large repository
 * (hundreds of releases at GITHUB_SYNC_RATE=1/s) runs for minutes, so the holder renews every
 * 30 s; missing three renewals in a row (a stalled event loop, a lost connection) is needed
 * before another replica can take over. A crashed holder delays the remote by at most 2 minutes,
 * under the smallest sensible interval (5m by default).
 */
export const SYNC_LEASE_MS = 120_000;
/** See SYNC_LEASE_MS. */
export const SYNC_LEASE_RENEW_MS = 30_000;

/** A successful claim: what the holder needs to scan conditionally. */
export interface SyncClaim {
  /** The releases-list ETags of the last successful scan, one per page, for If-None-Match. */
  readonly etags: readonly string[];
  /** When the last scan ended, epoch ms (database clock), or null if never. */
  readonly lastSyncedAt: number | null;
  /** When this lease expires unless renewed, epoch ms (database clock). */
  readonly expiresAt: number;
}

/** Inputs of claimSyncLease. */
export interface ClaimSyncLease {
  readonly remote: string;
  /** Who claims: a replica-unique id, e.g. `host:pid:random`. */
  readonly owner: string;
  readonly leaseMs?: number;
  /**
   * A prime (new remote, cold request, `sync --now`) skips the recency gate: it runs even if the
   * remote was synced a moment ago. It still respects a live lease: one scan at a time.
   */
  readonly prime?: boolean;
}

interface ClaimRow {
  [key: string]: unknown;
  etags: string;
  last_synced_at: number | null;
  sync_lease_expires: number;
}

/**
 * The statement that claims the sync lease of a remote, atomically.
 *
 * Why one upsert: the first claim of a remote inserts its row; later claims update it only when
 * the WHERE holds. Two replicas racing on the same row are serialised by the row lock (Postgres
 * re-evaluates the WHERE against the winner's committed row; SQLite has one writer at a time), so
 * of 20 simultaneous claimants exactly one sees an expired lease and takes it, and the other 19
 * see the winner's fresh lease and get no row back. The gate `last_synced_at <= now - interval`
 * makes the periodic claims of N replicas cost one scan per interval in total: a replica that
 * ticks 1 s after the winner released finds the remote fresh. A prime passes 0 as the interval.
 * The same text runs on both databases; only the clock expression differs. RETURNING names
 * columns unqualified because SQLite refuses the table alias there; on both they mean the target.
 */
export function claimSyncLeaseStatement(dialect: Dialect, c: ClaimSyncLease): Statement {
  const now = nowMs(dialect);
  return sql(
    `insert into github_rpm_sync_state as s (remote_name, sync_lease_owner, sync_lease_expires)
     select r.name, $2, ${now} + $3 from remotes r where r.name = $1
     on conflict (remote_name) do update
       set sync_lease_owner = excluded.sync_lease_owner,
           sync_lease_expires = excluded.sync_lease_expires
       where (s.sync_lease_expires is null or s.sync_lease_expires <= ${now})
         and (s.last_synced_at is null
              or s.last_synced_at <= ${now} - coalesce($4,
                   (select interval_ms from remotes where name = s.remote_name)))
     returning etags, last_synced_at, sync_lease_expires`,
    c.remote,
    c.owner,
    c.leaseMs ?? SYNC_LEASE_MS,
    c.prime === true ? 0 : null,
  );
}

/**
 * Runs claimSyncLeaseStatement; resolves to the claim, or undefined when the remote is not due,
 * another owner holds a live lease, or the remote does not exist.
 */
export async function claimSyncLease(
  db: Queryable,
  c: ClaimSyncLease,
): Promise<SyncClaim | undefined> {
  const rows = await db.query<ClaimRow>(claimSyncLeaseStatement(db.dialect, c));
  const row = rows[0];
  if (row === undefined) return undefined;
  return {
    etags: JSON.parse(row.etags) as string[],
    lastSyncedAt: row.last_synced_at === null ? null : Number(row.last_synced_at),
    expiresAt: Number(row.sync_lease_expires),
  };
}

/**
 * Extends a held lease by `leaseMs` from now. Only the owner can: after its lease expired and
 * another replica claimed it, the owner column names the other replica and this changes nothing.
 * Resolves false then, and the caller must stop its scan.
 */
export async function renewSyncLease(
  db: Queryable,
  remote: string,
  owner: string,
  leaseMs = SYNC_LEASE_MS,
): Promise<boolean> {
  const n = await db.exec(
    sql(
      `update github_rpm_sync_state set sync_lease_expires = ${nowMs(db.dialect)} + $3
       where remote_name = $1 and sync_lease_owner = $2`,
      remote,
      owner,
      leaseMs,
    ),
  );
  return n > 0;
}

/** How a scan ended, recorded when the lease is released. */
export interface SyncOutcome {
  readonly result: "ok" | "error";
  /** A one-line reason when result is "error". */
  readonly error?: string;
  /** The new releases-list ETags; omitted keeps the stored ones (a failed scan learned none). */
  readonly etags?: readonly string[];
}

/**
 * Releases the lease and records the scan: `last_synced_at` (database clock), the result, and
 * the ETags. A failed scan also sets `last_synced_at`, so a broken remote is retried once per
 * interval rather than on every 60 s tick; `sync --now` (a prime) retries at once. Only the
 * owner can release; resolves false when the lease had passed to another replica.
 */
export async function releaseSyncLease(
  db: Queryable,
  remote: string,
  owner: string,
  outcome: SyncOutcome,
): Promise<boolean> {
  const n = await db.exec(
    sql(
      `update github_rpm_sync_state
       set last_synced_at = ${nowMs(db.dialect)}, etags = coalesce($3, etags),
           last_result = $4, last_error = $5,
           sync_lease_owner = null, sync_lease_expires = null
       where remote_name = $1 and sync_lease_owner = $2`,
      remote,
      owner,
      outcome.etags === undefined ? null : JSON.stringify(outcome.etags),
      outcome.result,
      outcome.result === "error" ? (outcome.error ?? "unknown error") : null,
    ),
  );
  return n > 0;
}

/** The sync state of a remote, for `status` and the scheduler. */
export interface SyncState {
  readonly remote: string;
  readonly lastSyncedAt: number | null;
  readonly etags: readonly string[];
  readonly leaseOwner: string | null;
  readonly leaseExpires: number | null;
  /** Whether the lease is held right now, judged by the database clock. */
  readonly leaseLive: boolean;
  readonly lastResult: "ok" | "error" | null;
  readonly lastError: string | null;
  /** The database clock when this was read, epoch ms, to compute "next due" without skew. */
  readonly readAt: number;
}

interface StateRow {
  [key: string]: unknown;
  remote_name: string;
  last_synced_at: number | null;
  etags: string;
  sync_lease_owner: string | null;
  sync_lease_expires: number | null;
  last_result: string | null;
  last_error: string | null;
  db_now: number;
}

/** The sync state of `remote`, or undefined if it was never claimed. */
export async function getSyncState(db: Queryable, remote: string): Promise<SyncState | undefined> {
  const rows = await db.query<StateRow>(
    sql(
      `select remote_name, last_synced_at, etags, sync_lease_owner, sync_lease_expires,
              last_result, last_error, ${nowMs(db.dialect)} as db_now
       from github_rpm_sync_state where remote_name = $1`,
      remote,
    ),
  );
  const r = rows[0];
  if (r === undefined) return undefined;
  const expires = r.sync_lease_expires === null ? null : Number(r.sync_lease_expires);
  const readAt = Number(r.db_now);
  return {
    remote: r.remote_name,
    lastSyncedAt: r.last_synced_at === null ? null : Number(r.last_synced_at),
    etags: JSON.parse(r.etags) as string[],
    leaseOwner: r.sync_lease_owner,
    leaseExpires: expires,
    leaseLive: r.sync_lease_owner !== null && expires !== null && expires > readAt,
    lastResult: r.last_result === "ok" || r.last_result === "error" ? r.last_result : null,
    lastError: r.last_error,
    readAt,
  };
}
