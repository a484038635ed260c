import { ReposyncError } from "../errors.js";
import { nowMs, type Queryable, sql } from "./port.js";

/**
 * Asks for a prime of `names` (every remote when empty) by marking them in the database. No
 * process needs to reach another: every running syncer polls for marks (see findSyncWork), so
 * `reposync sync` works whether zero, one or ten servers run, and on whichever replica is free.
 * Resolves to the names marked; an unknown name is NOT_FOUND and marks nothing.
 */
export async function requestSync(db: Queryable, names: readonly string[]): Promise<string[]> {
  const known = (
    await db.query<{ name: string }>(sql("select name from remotes order by name"))
  ).map((r) => r.name);
  const missing = names.filter((n) => !known.includes(n));
  if (missing.length > 0) {
    throw new ReposyncError(
      "NOT_FOUND",
      `no remote named ${missing.map((n) => `"${n}"`).join(", ")}`,
    );
  }
  const targets = names.length === 0 ? known : [...new Set(names)];
  for (const name of targets) {
    await db.exec(
      sql(`update remotes set sync_requested_at = ${nowMs(db.dialect)} where name = $1`, name),
    );
  }
  return targets;
}

/**
 * Takes the request mark of `remote` that the syncer saw (`seen`, database clock), atomically:
 * of several replicas that saw the same request, exactly one gets true and primes the remote;
 * the others skip it, so one `reposync sync` costs one scan however many servers run. A newer
 * mark (set after `seen`) is not taken: it asks for a sync after this one.
 */
export async function takeSyncRequest(
  db: Queryable,
  remote: string,
  seen: number,
): Promise<boolean> {
  const n = await db.exec(
    sql(
      `update remotes set sync_requested_at = null
       where name = $1 and sync_requested_at = $2`,
      remote,
      seen,
    ),
  );
  return n > 0;
}

/**
 * Puts a taken request back when its sync could not start (another process holds the lease,
 * for a scan that may have listed the releases before the request was made). A newer mark that
 * arrived meanwhile is kept as it is.
 */
export async function restoreSyncRequest(
  db: Queryable,
  remote: string,
  seen: number,
): Promise<void> {
  await db.exec(
    sql(
      `update remotes set sync_requested_at = coalesce(sync_requested_at, $2) where name = $1`,
      remote,
      seen,
    ),
  );
}

/** A remote that wants a sync, and whether it is a prime (skipping the recency gate). */
export interface SyncWork {
  readonly remote: string;
  /**
   * Asked for with `reposync sync`: sync even if synced a moment ago. A never-synced remote is
   * not a prime here: the recency gate lets it through anyway, and keeps it from being scanned
   * twice when two replicas find it in the same second.
   */
  readonly prime: boolean;
  /** The request mark seen, epoch ms (database clock), to clear exactly it. */
  readonly requestedAt: number | null;
}

/**
 * The remotes that want a sync now and whose lease is free: requested ones (primes) and
 * never-synced ones, and with `includeDue` also those whose interval has passed. The syncer runs this
 * every second without `includeDue` (a new remote or a request is picked up at once) and on each
 * scheduler tick with it. Every condition is judged by the database clock, as the lease is.
 */
export async function findSyncWork(
  db: Queryable,
  options: { includeDue: boolean },
): Promise<SyncWork[]> {
  const now = nowMs(db.dialect);
  const due = options.includeDue ? `or s.last_synced_at <= ${now} - r.interval_ms` : "";
  const rows = await db.query<{ name: string; prime: number; sync_requested_at: number | null }>(
    sql(
      `select r.name, r.sync_requested_at,
              case when r.sync_requested_at is not null then 1 else 0 end as prime
       from remotes r left join github_rpm_sync_state s on s.remote_name = r.name
       where (s.sync_lease_expires is null or s.sync_lease_expires <= ${now})
         and (r.sync_requested_at is not null or s.last_synced_at is null ${due})
       order by r.name`,
    ),
  );
  return rows.map((r) => ({
    remote: r.name,
    prime: Number(r.prime) === 1,
    requestedAt: r.sync_requested_at === null ? null : Number(r.sync_requested_at),
  }));
}
