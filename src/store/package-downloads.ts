import { type Queryable, sql } from "./port.js";

/**
 * What the server needs to hand out one package: its identity (sha256 and size, from the
 * package row) and where GitHub keeps it (from the asset row). One indexed read per request.
 */
export interface PackageDownload {
  readonly remote: string;
  readonly assetId: number;
  /** The asset's file name, the last segment of the package's URL. */
  readonly name: string;
  /** sha256 of the whole file, lower-case hex (the pkgid repodata states). */
  readonly sha256: string;
  readonly size: number;
  /** The public download URL (404 on private repositories). */
  readonly browserDownloadUrl: string;
  /** The API URL; with the token and `Accept: application/octet-stream` it downloads. */
  readonly apiUrl: string | null;
  /** How the sync job reached the asset: `api` means a private repository. */
  readonly access: "browser" | "api";
}

interface DownloadRow {
  [key: string]: unknown;
  remote_name: string;
  asset_id: number;
  name: string;
  pkgid: string;
  size_package: number;
  download_url: string;
  api_url: string | null;
  access: string;
}

/**
 * The package of asset `assetId` of `remote`, or undefined when the asset has no package (never
 * derived, failed, pruned, or not this remote's).
 */
export async function findPackageDownload(
  db: Queryable,
  remote: string,
  assetId: number,
): Promise<PackageDownload | undefined> {
  const rows = await db.query<DownloadRow>(
    sql(
      `select p.remote_name, p.asset_id, a.name, p.pkgid, p.size_package, a.download_url, a.api_url,
         p.access
       from packages p join release_assets a
         on a.remote_name = p.remote_name and a.asset_id = p.asset_id
       where p.remote_name = $1 and p.asset_id = $2`,
      remote,
      assetId,
    ),
  );
  const r = rows[0];
  if (r === undefined) return undefined;
  return {
    remote: r.remote_name,
    assetId: Number(r.asset_id),
    name: r.name,
    sha256: r.pkgid,
    size: Number(r.size_package),
    browserDownloadUrl: r.download_url,
    apiUrl: r.api_url,
    access: r.access === "api" ? "api" : "browser",
  };
}
