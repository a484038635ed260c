import { isReposyncError, ReposyncError } from "../errors.js";
import { type AssetAccess, readAssetHeader } from "../github/assets.js";
import type { CandidateAsset } from "../github/candidate-assets.js";
import type { GitHubClient } from "../github/client.js";
import { GitHubHttpError } from "../github/retryable.js";
import { renderPackage } from "../repodata/fragments.js";
import type { PackageRecord } from "../store/packages.js";

/**
 * What reading one asset came to:
 * - `package`: its header was read and rendered;
 * - `failed`: the asset itself is the problem (not an RPM, a header repodata cannot carry, a
 *   size GitHub contradicts). Recorded with the reason and not read again until it changes;
 * - `deferred`: the attempt failed for a reason outside the asset (5xx after retries, a timeout,
 *   the rate limit, a shutdown). Nothing is recorded, so the next scan reads it again. `stop`
 *   says that reading further assets now is pointless (the budget is spent, the job is stopping).
 */
export type DeriveOutcome =
  | {
      readonly kind: "package";
      readonly record: PackageRecord;
      readonly requests: number;
      readonly downloaded: boolean;
    }
  | { readonly kind: "failed"; readonly reason: string }
  | { readonly kind: "deferred"; readonly error: ReposyncError; readonly stop: boolean };

/** Inputs of deriveAsset besides the asset. */
export interface DeriveOptions {
  readonly remote: string;
  readonly changelogLimit: number;
  readonly access?: AssetAccess;
  readonly signal?: AbortSignal;
}

/** Where a package lives in its repository: `packages/<asset id>/<asset name>`. */
export function locationHref(asset: Pick<CandidateAsset, "assetId" | "name">): string {
  return `packages/${asset.assetId}/${asset.name}`;
}

/**
 * `time file` of a remote's package: the asset's updated_at in whole seconds. Every replica
 * reads the same value from GitHub, so snapshots built anywhere are the same bytes.
 */
export function assetFileTime(updatedAt: string): number {
  const ms = Date.parse(updatedAt);
  return Number.isFinite(ms) ? Math.floor(ms / 1000) : 0;
}

// Codes that blame the asset's bytes: reading it again cannot give another answer.
const ASSET_FAULTS = new Set([
  "RPM_TRUNCATED",
  "RPM_BAD_LEAD",
  "RPM_BAD_HEADER",
  "RPM_LIMIT",
  "RPM_MISSING_TAG",
  "RPM_SIZE_MISMATCH",
  "RPM_FORBIDDEN_TEXT",
  "UPSTREAM_MISMATCH",
]);

// Codes after which every further read in this scan would fail the same way.
const STOP_CODES = new Set(["GITHUB_RATE_LIMITED", "ABORTED", "DB_UNREACHABLE", "DB_ERROR"]);

/** Sorts a read failure into `failed` or `deferred`; see DeriveOutcome. */
export function classifyDeriveError(err: unknown, signal?: AbortSignal): DeriveOutcome {
  if (signal?.aborted) {
    const error = isReposyncError(err, "ABORTED")
      ? err
      : new ReposyncError("ABORTED", "stopped before the asset was read", { cause: err });
    return { kind: "deferred", error, stop: true };
  }
  if (isReposyncError(err) && ASSET_FAULTS.has(err.code)) {
    return { kind: "failed", reason: `${err.code}: ${err.message}` };
  }
  const error = isReposyncError(err)
    ? err
    : new ReposyncError("GITHUB_HTTP", err instanceof Error ? err.message : String(err), {
        cause: err,
      });
  // Bad credentials fail every request alike.
  const unauthorized = err instanceof GitHubHttpError && err.status === 401;
  return { kind: "deferred", error, stop: STOP_CODES.has(error.code) || unauthorized };
}

/**
 * Reads one asset's header (ranged GETs; a whole streamed download when GitHub has no digest)
 * and renders its repodata fragments. Never throws: every failure is an outcome.
 */
export async function deriveAsset(
  client: GitHubClient,
  asset: CandidateAsset,
  options: DeriveOptions,
): Promise<DeriveOutcome> {
  try {
    const read = await readAssetHeader(client, asset, {
      access: options.access ?? "auto",
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const { pkg } = read;
    const href = locationHref(asset);
    const fileTime = assetFileTime(asset.updatedAt);
    const fragments = renderPackage(pkg, {
      sha256: read.sha256,
      locationHref: href,
      fileTime,
      changelogLimit: options.changelogLimit,
    });
    return {
      kind: "package",
      requests: read.requests,
      downloaded: read.downloaded,
      record: {
        remote: options.remote,
        assetId: asset.assetId,
        pkgid: read.sha256,
        locationHref: href,
        name: pkg.name,
        arch: pkg.arch,
        epoch: pkg.epoch === null ? "0" : String(pkg.epoch),
        version: pkg.version,
        release: pkg.release,
        fileTime,
        sizePackage: pkg.fileSize,
        headerStart: pkg.headerStart,
        headerEnd: pkg.headerEnd,
        fragments,
        // The route that worked: the next asset of the remote, and the server, use it too.
        access: read.access,
      },
    };
  } catch (err) {
    return classifyDeriveError(err, options.signal);
  }
}
