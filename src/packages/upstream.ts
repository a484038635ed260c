import { ReposyncError } from "../errors.js";
import { type AssetAccess, type AssetLocation, openAssetDownload } from "../github/assets.js";
import type { GitHubClient } from "../github/client.js";
import type { PackageIdentity } from "./coalesce.js";
import type { PackageBytes } from "./content-store.js";
import type { FetchUpstream } from "./package-cache.js";

/** A package as the cache's GitHub upstream needs it: identity plus where its asset lives. */
export interface GitHubPackage
  extends PackageIdentity,
    Pick<AssetLocation, "assetId" | "name" | "url" | "browserDownloadUrl"> {
  /**
   * `browser` for a public repo (the browser_download_url, anonymous, no API budget), `api` for
   * a private one (the asset's API URL with the token and `Accept: application/octet-stream`;
   * the CDN it redirects to never sees the token), `auto` to try the first, then the second.
   */
  readonly access: AssetAccess;
}

export interface GitHubUpstreamOptions<P extends GitHubPackage> {
  /** The client (API base URL + token, sharing the global bucket) of the package's remote. */
  readonly clientFor: (pkg: P) => GitHubClient;
  /** Per-attempt timeout of the download (10 min). */
  readonly downloadTimeoutMs?: number;
}

/**
 * The real upstream of the package cache: a whole-file GET of the asset through src/github's
 * bucketed fetch, redirects followed by hand there (openAssetDownload), so the token policy and
 * the rate budget are the syncer's. A Content-Length that disagrees with the package's size is
 * refused before any byte is read; the store verifies size and digest of what arrives anyway.
 */
export function createGitHubUpstream<P extends GitHubPackage>(
  options: GitHubUpstreamOptions<P>,
): FetchUpstream<P> {
  return async (pkg, signal): Promise<PackageBytes> => {
    const response = await openAssetDownload(
      options.clientFor(pkg),
      {
        assetId: pkg.assetId,
        name: pkg.name,
        size: pkg.size,
        url: pkg.url,
        browserDownloadUrl: pkg.browserDownloadUrl,
        digest: `sha256:${pkg.sha256}`,
      },
      {
        access: pkg.access,
        signal,
        ...(options.downloadTimeoutMs !== undefined
          ? { downloadTimeoutMs: options.downloadTimeoutMs }
          : {}),
      },
    );
    const length = response.headers.get("content-length");
    if (response.status !== 200 || !response.body) {
      await response.body?.cancel().catch(() => {});
      throw new ReposyncError(
        "UPSTREAM_MISMATCH",
        `${pkg.name}: expected the whole file, got HTTP ${response.status}`,
      );
    }
    if (length !== null && Number(length) !== pkg.size) {
      await response.body.cancel().catch(() => {});
      throw new ReposyncError(
        "UPSTREAM_MISMATCH",
        `${pkg.name}: upstream has ${length} bytes, the package ${pkg.size}`,
      );
    }
    return bodyKeepingResponse(response, response.body);
  };
}

/**
 * The body, read through a generator that keeps `response` reachable until it is read. undici
 * cancels the body of a Response that is garbage-collected while that body is still unlocked, and
 * the store creates its folder and temporary file before it takes a reader: returning the bare
 * stream let a collection in between end the download as 0 bytes (UPSTREAM_MISMATCH) under load.
 * Returning early from the generator (a mismatch) cancels the stream, as the store expects.
 */
async function* bodyKeepingResponse(
  response: Response,
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<Uint8Array> {
  try {
    yield* body;
  } finally {
    void response;
  }
}
