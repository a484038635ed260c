import type { GitHubClient } from "../github/client.js";
import type { StoredPackage } from "../packages/content-store.js";
import type { PackageCache } from "../packages/package-cache.js";
import { redirectTarget } from "../packages/redirect-target.js";
import type { GitHubPackage } from "../packages/upstream.js";
import type { PackageDownload } from "../store/package-downloads.js";
import type { Remote } from "../store/remote-input.js";

/** How the server gets a package's bytes or its address, per package mode. */
export interface PackageSource {
  /** `cache` mode: the stored file, downloaded first on a miss (shared by concurrent misses). */
  stored(remote: Remote, pkg: PackageDownload, signal: AbortSignal): Promise<StoredPackage>;
  /** `redirect` mode: a URL the client can GET without credentials. */
  redirect(remote: Remote, pkg: PackageDownload, signal: AbortSignal): Promise<string>;
}

/** A package as the cache's GitHub upstream sees it, with the remote whose client fetches it. */
export interface RemotePackage extends GitHubPackage {
  readonly remote: Remote;
}

/**
 * The package as src/packages wants it: through the route the sync job found working (the API
 * URL with the token for a private repository, so neither a redirect-mode client nor a cache
 * download is sent to a public URL that answers 404). A row without an API URL (stored before
 * the column existed) can only be reached through its public URL.
 */
export function toRemotePackage(remote: Remote, pkg: PackageDownload): RemotePackage {
  return {
    remote,
    sha256: pkg.sha256,
    size: pkg.size,
    assetId: pkg.assetId,
    name: pkg.name,
    url: pkg.apiUrl ?? pkg.browserDownloadUrl,
    browserDownloadUrl: pkg.browserDownloadUrl,
    access: pkg.apiUrl === null ? "browser" : pkg.access === "api" ? "api" : "auto",
  };
}

/**
 * The production source: the package cache for `cache` remotes, redirectTarget for `redirect`
 * ones, each through the GitHub client (API URL + token, the global bucket) of the remote.
 */
export function githubPackageSource(options: {
  readonly cache: PackageCache<RemotePackage>;
  readonly clientFor: (remote: Remote) => GitHubClient;
}): PackageSource {
  return {
    stored: (remote, pkg, signal) => options.cache.get(toRemotePackage(remote, pkg), signal),
    redirect: (remote, pkg, signal) =>
      redirectTarget(options.clientFor(remote), toRemotePackage(remote, pkg), signal),
  };
}
