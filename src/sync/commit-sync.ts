import { ReposyncError } from "../errors.js";
import type { CandidateAsset } from "../github/candidate-assets.js";
import type { ReleasePage } from "../github/releases.js";
import type { RateLimitBudget } from "../github/token-bucket.js";
import { buildSnapshot, compareLocations } from "../repodata/snapshot.js";
import { deleteAsset, refreshAssetLocation, upsertAsset } from "../store/assets.js";
import {
  deletePackage,
  listPackageFragments,
  type PackageRecord,
  upsertPackage,
} from "../store/packages.js";
import { type Database, type Queryable, sql } from "../store/port.js";
import { latestSnapshot, pruneSnapshots, saveSnapshot } from "../store/snapshots.js";
import { releaseSyncLease, type SyncOutcome } from "../store/sync-lease.js";
import { holdsSyncLease, type SyncSummary, saveSyncRecord } from "../store/sync-records.js";

/** One listed asset the scan read: its package, or why it has none. */
export interface ReadAsset {
  readonly asset: CandidateAsset;
  readonly record?: PackageRecord;
  /** Set when the asset cannot become a package; recorded so it is not read again. */
  readonly error?: string;
}

/** Everything one scan changes, applied by commitSync in one transaction. */
export interface SyncChanges {
  readonly remote: string;
  readonly owner: string;
  /** Stored assets to delete with their packages: vanished, replaced, or to read again. */
  readonly removed: readonly number[];
  readonly read: readonly ReadAsset[];
  /** Listed assets whose identity is unchanged: their URLs and tags are refreshed. */
  readonly unchanged: readonly CandidateAsset[];
  /** The listing to store; omitted keeps the stored one. */
  readonly listing?: readonly ReleasePage[];
  readonly budget?: RateLimitBudget;
  readonly outcome: SyncOutcome;
  /** The counts so far; `packages` and `snapshot` are filled in here. */
  readonly summary: Omit<SyncSummary, "packages" | "snapshot">;
  /** The syncer's clock, epoch ms: snapshot creation and file retention. */
  readonly now: number;
}

/** What the commit wrote. */
export interface CommitResult {
  readonly summary: SyncSummary;
  /** The revision of the snapshot written, or null when the repodata did not change. */
  readonly snapshot: string | null;
}

/** The names of the current snapshot's files, to tell whether a rebuild changed anything. */
async function currentFileNames(tx: Queryable, remote: string): Promise<string[]> {
  const rows = await tx.query<{ name: string }>(
    sql(
      "select name from snapshot_files where remote_name = $1 and replaced_at is null order by name",
      remote,
    ),
  );
  return rows.map((r) => r.name);
}

/**
 * Rebuilds the remote's snapshot from its package rows inside the transaction and stores it,
 * unless its data files are the ones already current (then the repodata did not change, and a
 * new repomd.xml would only make every dnf client download the same files again).
 *
 * The revision comes from the data: the newest package's file time, raised above the previous
 * revision when needed, because a removal can leave the newest file time where it was and a
 * revision must name one snapshot. Never the builder's clock.
 */
async function rebuildSnapshot(tx: Queryable, remote: string, now: number): Promise<string | null> {
  const rows = await listPackageFragments(tx, remote);
  rows.sort((a, b) => compareLocations(a.locationHref, b.locationHref));
  const previous = await latestSnapshot(tx, remote);
  const newest = rows.reduce((max, r) => Math.max(max, r.fileTime), 0);
  const previousRevision = previous === undefined ? Number.NaN : Number(previous.revision);
  const revision = Number.isSafeInteger(previousRevision)
    ? Math.max(newest, previousRevision + 1)
    : newest;
  const snapshot = await buildSnapshot(
    rows.map((r) => r.fragments),
    { packages: rows.length, revision },
  );
  if (previous !== undefined) {
    const names = snapshot.files.map((f) => f.name).sort();
    const current = await currentFileNames(tx, remote);
    if (names.join("\n") === current.join("\n")) return null;
  }
  const saved = await saveSnapshot(tx, remote, snapshot, now);
  return saved.revision;
}

/**
 * Applies a scan in one transaction: deletes vanished assets (their packages cascade), stores
 * what was read, rebuilds the snapshot when the packages changed (or the remote has none yet),
 * drops snapshot files past their grace hour, records the listing and counts, and releases the
 * lease. It first checks that `owner` still holds the lease: a holder that lost it mid-scan
 * commits nothing (CONFLICT), so two holders can never interleave their writes.
 */
export async function commitSync(db: Database, changes: SyncChanges): Promise<CommitResult> {
  const { remote, owner } = changes;
  return db.transaction(async (tx) => {
    if (!(await holdsSyncLease(tx, remote, owner))) {
      throw new ReposyncError(
        "CONFLICT",
        `the sync lease of ${remote} passed to another process; this scan's results were dropped`,
      );
    }
    for (const id of changes.removed) await deleteAsset(tx, remote, id);
    for (const item of changes.read) {
      await upsertAsset(tx, remote, item.asset, item.record ? null : (item.error ?? "unknown"));
      if (item.record) await upsertPackage(tx, item.record);
      else await deletePackage(tx, remote, item.asset.assetId);
    }
    for (const asset of changes.unchanged) await refreshAssetLocation(tx, remote, asset);

    const touched = changes.removed.length > 0 || changes.read.length > 0;
    const cold = (await latestSnapshot(tx, remote)) === undefined;
    const snapshot = touched || cold ? await rebuildSnapshot(tx, remote, changes.now) : null;
    await pruneSnapshots(tx, remote, changes.now);

    const counted = await tx.query<{ n: number | string }>(
      sql("select count(*) as n from packages where remote_name = $1", remote),
    );
    const summary: SyncSummary = {
      ...changes.summary,
      packages: Number(counted[0]?.n ?? 0),
      snapshot,
    };
    await saveSyncRecord(tx, remote, {
      ...(changes.listing ? { listing: changes.listing } : {}),
      ...(changes.budget ? { budget: changes.budget } : {}),
      summary,
    });
    await releaseSyncLease(tx, remote, owner, changes.outcome);
    return { summary, snapshot };
  });
}
