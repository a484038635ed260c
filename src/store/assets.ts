import type { CandidateAsset } from "../github/candidate-assets.js";
import { type Queryable, sql } from "./port.js";

/**
 * A release asset as the last sync stored it: the stable fields the next listing is compared
 * with, where to download it, and why its header could not be read, if it could not.
 */
export interface StoredAsset {
  readonly remote: string;
  readonly assetId: number;
  readonly name: string;
  readonly size: number;
  readonly updatedAt: string;
  readonly digest: string | null;
  readonly state: string;
  /** The public download URL (404 on private repositories). */
  readonly downloadUrl: string;
  /** The API URL; with the token and `Accept: application/octet-stream` it downloads. */
  readonly apiUrl: string | null;
  readonly releaseId: number;
  readonly tag: string;
  readonly prerelease: boolean;
  /** Why the package could not be derived; such an asset is not read again until it changes. */
  readonly deriveError: string | null;
}

interface AssetRow {
  [key: string]: unknown;
  remote_name: string;
  asset_id: number;
  name: string;
  size: number;
  updated_at: string;
  digest: string | null;
  state: string;
  download_url: string;
  api_url: string | null;
  release_id: number;
  release_tag: string;
  prerelease: boolean | number;
  derive_error: string | null;
}

const COLUMNS =
  "remote_name, asset_id, name, size, updated_at, digest, state, download_url, api_url, release_id, release_tag, prerelease, derive_error";

function toAsset(r: AssetRow): StoredAsset {
  return {
    remote: r.remote_name,
    assetId: Number(r.asset_id),
    name: r.name,
    size: Number(r.size),
    updatedAt: r.updated_at,
    digest: r.digest,
    state: r.state,
    downloadUrl: r.download_url,
    apiUrl: r.api_url,
    releaseId: Number(r.release_id),
    tag: r.release_tag,
    prerelease: Boolean(r.prerelease),
    deriveError: r.derive_error,
  };
}

/** Every stored asset of `remote`, failed ones included, by id. */
export async function listStoredAssets(db: Queryable, remote: string): Promise<StoredAsset[]> {
  const rows = await db.query<AssetRow>(
    sql(`select ${COLUMNS} from release_assets where remote_name = $1 order by asset_id`, remote),
  );
  return rows.map(toAsset);
}

/** The assets of `remote` whose package could not be derived, with the reason, by name. */
export async function listFailedAssets(db: Queryable, remote: string): Promise<StoredAsset[]> {
  const rows = await db.query<AssetRow>(
    sql(
      `select ${COLUMNS} from release_assets
       where remote_name = $1 and derive_error is not null order by name, asset_id`,
      remote,
    ),
  );
  return rows.map(toAsset);
}

/**
 * Stores (or overwrites) a listed asset. `deriveError` null means its package row follows in the
 * same transaction; a string records why it has none. Overwriting an asset whose content changed
 * under the same id goes with replacing its package row (see packages.ts).
 */
export async function upsertAsset(
  db: Queryable,
  remote: string,
  asset: CandidateAsset,
  deriveError: string | null,
): Promise<void> {
  await db.exec(
    sql(
      `insert into release_assets (${COLUMNS})
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
       on conflict (remote_name, asset_id) do update set
         name = excluded.name, size = excluded.size, updated_at = excluded.updated_at,
         digest = excluded.digest, state = excluded.state, download_url = excluded.download_url,
         api_url = excluded.api_url, release_id = excluded.release_id,
         release_tag = excluded.release_tag, prerelease = excluded.prerelease,
         derive_error = excluded.derive_error`,
      remote,
      asset.assetId,
      asset.name,
      asset.size,
      asset.updatedAt,
      asset.digest,
      asset.state,
      asset.browserDownloadUrl,
      asset.url,
      asset.releaseId,
      asset.tag,
      asset.prerelease,
      deriveError,
    ),
  );
}

/**
 * Refreshes the fields of an unchanged asset that are not part of its identity (a renamed tag
 * moves the download URL), leaving its package alone. Resolves true when something changed.
 */
export async function refreshAssetLocation(
  db: Queryable,
  remote: string,
  asset: CandidateAsset,
): Promise<boolean> {
  const n = await db.exec(
    sql(
      `update release_assets set download_url = $3, api_url = $4, release_tag = $5, prerelease = $6
       where remote_name = $1 and asset_id = $2
         and (download_url <> $3 or api_url is null or api_url <> $4 or release_tag <> $5
              or prerelease <> $6)`,
      remote,
      asset.assetId,
      asset.browserDownloadUrl,
      asset.url,
      asset.tag,
      asset.prerelease,
    ),
  );
  return n > 0;
}

/** Removes an asset that vanished upstream; its package row goes with it (on delete cascade). */
export async function deleteAsset(db: Queryable, remote: string, assetId: number): Promise<void> {
  await db.exec(
    sql("delete from release_assets where remote_name = $1 and asset_id = $2", remote, assetId),
  );
}
