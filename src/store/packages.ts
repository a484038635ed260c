import type { PackageFragments } from "../repodata/fragments.js";
import { type Queryable, sql } from "./port.js";

/**
 * A package derived from one release asset: the identity dnf sees, where its header lies, and
 * its three repodata fragments, rendered once when the package was derived so that a snapshot
 * is a concatenation.
 */
export interface PackageRecord {
  readonly remote: string;
  readonly assetId: number;
  /** sha256 of the whole file, hex. */
  readonly pkgid: string;
  /** `packages/<asset id>/<asset name>`. */
  readonly locationHref: string;
  readonly name: string;
  readonly arch: string;
  /** "0" when the header has no epoch, as repodata writes it. */
  readonly epoch: string;
  readonly version: string;
  readonly release: string;
  /** The asset's updated_at in seconds: the same on every replica, unlike a local mtime. */
  readonly fileTime: number;
  readonly sizePackage: number;
  readonly headerStart: number;
  readonly headerEnd: number;
  readonly fragments: PackageFragments;
  /** How the asset was reached: `api` for a private repository's (the token is needed). */
  readonly access: "browser" | "api";
}

/** Stores a package, replacing the one of the same asset (a replaced upload). */
export async function upsertPackage(db: Queryable, p: PackageRecord): Promise<void> {
  await db.exec(
    sql(
      `insert into packages (remote_name, asset_id, pkgid, location_href, name, arch, epoch,
         version, release, file_time, size_package, header_start, header_end,
         primary_xml, filelists_xml, other_xml, access)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
       on conflict (remote_name, asset_id) do update set
         pkgid = excluded.pkgid, location_href = excluded.location_href, name = excluded.name,
         arch = excluded.arch, epoch = excluded.epoch, version = excluded.version,
         release = excluded.release, file_time = excluded.file_time,
         size_package = excluded.size_package, header_start = excluded.header_start,
         header_end = excluded.header_end, primary_xml = excluded.primary_xml,
         filelists_xml = excluded.filelists_xml, other_xml = excluded.other_xml,
         access = excluded.access`,
      p.remote,
      p.assetId,
      p.pkgid,
      p.locationHref,
      p.name,
      p.arch,
      p.epoch,
      p.version,
      p.release,
      p.fileTime,
      p.sizePackage,
      p.headerStart,
      p.headerEnd,
      p.fragments.primary,
      p.fragments.filelists,
      p.fragments.other,
      p.access,
    ),
  );
}

/** Removes the package of an asset, if any (its asset row stays, e.g. to record a failure). */
export async function deletePackage(db: Queryable, remote: string, assetId: number): Promise<void> {
  await db.exec(
    sql("delete from packages where remote_name = $1 and asset_id = $2", remote, assetId),
  );
}

/** What a snapshot build needs of each package. */
export interface PackageFragmentRow {
  readonly locationHref: string;
  readonly fileTime: number;
  readonly fragments: PackageFragments;
}

interface FragmentRow {
  [key: string]: unknown;
  location_href: string;
  file_time: number;
  primary_xml: string;
  filelists_xml: string;
  other_xml: string;
}

/**
 * The fragments of every package of `remote`, unordered: repodata order (createrepo_c's, by
 * file name) is not an SQL collation, so the caller sorts with compareLocations.
 */
export async function listPackageFragments(
  db: Queryable,
  remote: string,
): Promise<PackageFragmentRow[]> {
  const rows = await db.query<FragmentRow>(
    sql(
      `select location_href, file_time, primary_xml, filelists_xml, other_xml
       from packages where remote_name = $1`,
      remote,
    ),
  );
  return rows.map((r) => ({
    locationHref: r.location_href,
    fileTime: Number(r.file_time),
    fragments: { primary: r.primary_xml, filelists: r.filelists_xml, other: r.other_xml },
  }));
}

/** The package of an asset (for serving it), without its fragments. */
export interface PackageLocation {
  readonly assetId: number;
  readonly pkgid: string;
  readonly locationHref: string;
  readonly sizePackage: number;
}

/** How many packages each remote has, by remote name (remotes without any are absent). */
export async function countPackages(db: Queryable): Promise<Map<string, number>> {
  const rows = await db.query<{ remote_name: string; n: number | string }>(
    sql("select remote_name, count(*) as n from packages group by remote_name"),
  );
  return new Map(rows.map((r) => [r.remote_name, Number(r.n)]));
}

/** The packages of `remote` with where they live, by location. */
export async function listPackageLocations(
  db: Queryable,
  remote: string,
): Promise<PackageLocation[]> {
  const rows = await db.query<{
    asset_id: number;
    pkgid: string;
    location_href: string;
    size_package: number;
  }>(
    sql(
      `select asset_id, pkgid, location_href, size_package from packages
       where remote_name = $1 order by location_href`,
      remote,
    ),
  );
  return rows.map((r) => ({
    assetId: Number(r.asset_id),
    pkgid: r.pkgid,
    locationHref: r.location_href,
    sizePackage: Number(r.size_package),
  }));
}
