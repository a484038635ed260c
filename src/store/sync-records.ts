import type { ReleasePage } from "../github/releases.js";
import type { RateLimitBudget } from "../github/token-bucket.js";
import { nowMs, type Queryable, sql } from "./port.js";

/** Counts of one scan, kept with the sync state for `status`. */
export interface SyncSummary {
  /** Release-list pages fetched, and how many of them answered 304. */
  readonly pages: number;
  readonly notModifiedPages: number;
  /** Candidate `.rpm` assets in the listing (after filters). */
  readonly listed: number;
  readonly added: number;
  readonly changed: number;
  readonly removed: number;
  /** Assets read in this scan, and of those, how many could not become packages. */
  readonly read: number;
  readonly failed: number;
  /** Assets left for the next scan (a transient failure, the rate limit, a shutdown). */
  readonly deferred: number;
  /** Packages after the scan. */
  readonly packages: number;
  /** The revision of the snapshot this scan wrote, or null when it wrote none. */
  readonly snapshot: string | null;
}

/**
 * The listing the last scan ended with, page by page; empty when never stored. Stored in the
 * same transaction as the packages it produced, so a 304 page reuses a listing the stored
 * packages agree with.
 */
export async function loadListing(db: Queryable, remote: string): Promise<ReleasePage[]> {
  const rows = await db.query<{ listing: string | null }>(
    sql("select listing from github_rpm_sync_state where remote_name = $1", remote),
  );
  const text = rows[0]?.listing;
  if (text === null || text === undefined) return [];
  return JSON.parse(text) as ReleasePage[];
}

/**
 * Records what a scan learned, before its lease is released in the same transaction: the listing
 * (omitted when the listing failed, keeping the stored one), the budget and the counts.
 */
export async function saveSyncRecord(
  tx: Queryable,
  remote: string,
  record: {
    readonly listing?: readonly ReleasePage[];
    readonly budget?: RateLimitBudget;
    readonly summary?: SyncSummary;
  },
): Promise<void> {
  await tx.exec(
    sql(
      `update github_rpm_sync_state
       set listing = coalesce($2, listing), github_budget = coalesce($3, github_budget),
           last_summary = coalesce($4, last_summary)
       where remote_name = $1`,
      remote,
      record.listing === undefined ? null : JSON.stringify(record.listing),
      record.budget === undefined ? null : JSON.stringify(record.budget),
      record.summary === undefined ? null : JSON.stringify(record.summary),
    ),
  );
}

/**
 * Whether `owner` still holds the sync lease of `remote`. Checked inside the commit transaction
 * (and on Postgres with the row locked), so a holder whose lease expired and passed to another
 * replica mid-scan cannot overwrite the newer holder's work.
 */
export async function holdsSyncLease(
  tx: Queryable,
  remote: string,
  owner: string,
): Promise<boolean> {
  // SQLite has no FOR UPDATE; its transactions already hold the single write lock (BEGIN IMMEDIATE).
  const lock = tx.dialect === "postgres" ? " for update" : "";
  const rows = await tx.query(
    sql(
      `select 1 as held from github_rpm_sync_state
       where remote_name = $1 and sync_lease_owner = $2${lock}`,
      remote,
      owner,
    ),
  );
  return rows.length > 0;
}

/** Everything `status` shows about the sync of one remote. */
export interface SyncRecord {
  readonly remote: string;
  readonly lastSyncedAt: number | null;
  readonly lastResult: "ok" | "error" | null;
  readonly lastError: string | null;
  readonly leaseOwner: string | null;
  readonly leaseExpires: number | null;
  readonly summary: SyncSummary | null;
  readonly budget: RateLimitBudget | null;
  readonly requestedAt: number | null;
  /** The database clock when read, epoch ms. */
  readonly readAt: number;
}

interface RecordRow {
  [key: string]: unknown;
  name: string;
  last_synced_at: number | null;
  last_result: string | null;
  last_error: string | null;
  sync_lease_owner: string | null;
  sync_lease_expires: number | null;
  last_summary: string | null;
  github_budget: string | null;
  sync_requested_at: number | null;
  db_now: number;
}

const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

/** The sync record of every remote (never-synced ones with nulls), by remote name. */
export async function listSyncRecords(db: Queryable): Promise<SyncRecord[]> {
  const rows = await db.query<RecordRow>(
    sql(
      `select r.name, s.last_synced_at, s.last_result, s.last_error, s.sync_lease_owner,
              s.sync_lease_expires, s.last_summary, s.github_budget, r.sync_requested_at,
              ${nowMs(db.dialect)} as db_now
       from remotes r left join github_rpm_sync_state s on s.remote_name = r.name
       order by r.name`,
    ),
  );
  return rows.map((r) => ({
    remote: r.name,
    lastSyncedAt: numOrNull(r.last_synced_at),
    lastResult: r.last_result === "ok" || r.last_result === "error" ? r.last_result : null,
    lastError: r.last_error,
    leaseOwner: r.sync_lease_owner,
    leaseExpires: numOrNull(r.sync_lease_expires),
    summary: r.last_summary === null ? null : (JSON.parse(r.last_summary) as SyncSummary),
    budget: r.github_budget === null ? null : (JSON.parse(r.github_budget) as RateLimitBudget),
    requestedAt: numOrNull(r.sync_requested_at),
    readAt: Number(r.db_now),
  }));
}
