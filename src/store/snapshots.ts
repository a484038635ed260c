import type { RepodataSnapshot } from "../repodata/snapshot.js";
import { type Queryable, sql } from "./port.js";

/**
 * How long the files of a replaced snapshot stay served. A client that fetched the old
 * repomd.xml a moment before the swap asks for the files it names next; dnf does that within
 * seconds, a slow mirror chain within minutes. An hour covers both with room to spare.
 */
export const SNAPSHOT_FILE_GRACE_MS = 3_600_000;

/** The current snapshot of a remote: its repomd.xml and when it was stored. */
export interface StoredSnapshot {
  readonly remote: string;
  /** The `<revision>` of repomd.xml, as text. */
  readonly revision: string;
  /** Epoch milliseconds (the syncer's clock), strictly increasing per remote. */
  readonly createdAt: number;
  readonly repomd: Buffer;
}

interface SnapshotRow {
  [key: string]: unknown;
  remote_name: string;
  revision: string;
  created_at: number;
  repomd: Uint8Array;
}

/** The newest snapshot of `remote`, or undefined when none was written yet (a cold remote). */
export async function latestSnapshot(
  db: Queryable,
  remote: string,
): Promise<StoredSnapshot | undefined> {
  const rows = await db.query<SnapshotRow>(
    sql(
      `select remote_name, revision, created_at, repomd from repodata_snapshots
       where remote_name = $1 order by created_at desc limit 1`,
      remote,
    ),
  );
  const r = rows[0];
  if (r === undefined) return undefined;
  return {
    remote: r.remote_name,
    revision: r.revision,
    createdAt: Number(r.created_at),
    repomd: Buffer.from(r.repomd),
  };
}

/**
 * The bytes of a snapshot file by its name in repodata/ (`<sha256>-primary.xml.gz`), current or
 * replaced less than SNAPSHOT_FILE_GRACE_MS before `now`; undefined otherwise.
 */
export async function findSnapshotFile(
  db: Queryable,
  remote: string,
  name: string,
  now: number,
): Promise<Buffer | undefined> {
  const rows = await db.query<{ bytes: Uint8Array }>(
    sql(
      `select bytes from snapshot_files
       where remote_name = $1 and name = $2 and (replaced_at is null or replaced_at > $3)`,
      remote,
      name,
      now - SNAPSHOT_FILE_GRACE_MS,
    ),
  );
  return rows[0] === undefined ? undefined : Buffer.from(rows[0].bytes);
}

/**
 * Stores `snapshot` as the current one of `remote`, in the caller's transaction. The files of
 * the snapshot it replaces are marked replaced now and kept for SNAPSHOT_FILE_GRACE_MS (a file
 * the new snapshot shares by name simply stays current). `now` is the syncer's clock; the
 * creation time is kept strictly above the previous one so "newest" never depends on two
 * replicas' clocks agreeing.
 */
export async function saveSnapshot(
  tx: Queryable,
  remote: string,
  snapshot: RepodataSnapshot,
  now: number,
): Promise<StoredSnapshot> {
  const previous = await latestSnapshot(tx, remote);
  const createdAt = Math.max(now, (previous?.createdAt ?? 0) + 1);
  const revision = String(snapshot.revision);
  await tx.exec(
    sql(
      `insert into repodata_snapshots (remote_name, revision, created_at, repomd)
       values ($1, $2, $3, $4)
       on conflict (remote_name, revision) do update
         set created_at = excluded.created_at, repomd = excluded.repomd`,
      remote,
      revision,
      createdAt,
      snapshot.repomd,
    ),
  );
  await tx.exec(
    sql(
      `update snapshot_files set replaced_at = $2
       where remote_name = $1 and replaced_at is null`,
      remote,
      now,
    ),
  );
  for (const file of snapshot.files) {
    await tx.exec(
      sql(
        `insert into snapshot_files (remote_name, name, revision, bytes, created_at, replaced_at)
         values ($1, $2, $3, $4, $5, null)
         on conflict (remote_name, name) do update
           set revision = excluded.revision, replaced_at = null`,
        remote,
        file.name,
        revision,
        file.bytes,
        createdAt,
      ),
    );
  }
  return { remote, revision, createdAt, repomd: snapshot.repomd };
}

/**
 * Deletes the files replaced more than SNAPSHOT_FILE_GRACE_MS before `now`, and the old
 * repomd rows none of whose files remain. Resolves to the number of files deleted.
 */
export async function pruneSnapshots(tx: Queryable, remote: string, now: number): Promise<number> {
  const files = await tx.exec(
    sql(
      `delete from snapshot_files
       where remote_name = $1 and replaced_at is not null and replaced_at <= $2`,
      remote,
      now - SNAPSHOT_FILE_GRACE_MS,
    ),
  );
  const current = await latestSnapshot(tx, remote);
  await tx.exec(
    sql(
      `delete from repodata_snapshots
       where remote_name = $1 and revision <> $2
         and not exists (select 1 from snapshot_files f
                         where f.remote_name = repodata_snapshots.remote_name
                           and f.revision = repodata_snapshots.revision)`,
      remote,
      current?.revision ?? "",
    ),
  );
  return files;
}
