import { ReposyncError } from "../errors.js";
import { GITHUB_API_VERSION, type GitHubClient } from "../github/client.js";
import { GitHubHttpError, headerRecord } from "../github/retryable.js";
import { toReposyncError, withRetries } from "../github/with-retries.js";
import type { GitHubPackage } from "./upstream.js";

/**
 * Where the `redirect` package mode sends a client: a URL it can GET without credentials.
 *
 * A public asset (`browser` or `auto` access) is its browser_download_url, and costs no request:
 * GitHub redirects the client to the CDN itself. A private asset cannot be sent there (the
 * client has no token, and must never be given ours), so one request is made here: the asset's
 * API URL with the token and `Accept: application/octet-stream`, redirects not followed, and
 * the signed CDN URL GitHub answers with is the target. It is short-lived, which suits a client
 * that follows the redirect at once. That request takes a bucket token like every other.
 *
 * `auto` is treated as public here, deliberately: telling a private asset apart would cost a
 * probe request per redirect, and every request waits for the global bucket (1/s by default),
 * which would make redirect mode crawl under load. A caller that knows the repo is private (the
 * remote has a token) passes `api`; a private asset sent as `auto` gets GitHub's 404.
 *
 * Hand-written rather than reusing openAssetDownload: that one follows every hop to the bytes,
 * and here the wanted result is the first Location, with no body fetched at all.
 */
export async function redirectTarget(
  client: GitHubClient,
  pkg: Pick<GitHubPackage, "name" | "url" | "browserDownloadUrl" | "access">,
  signal?: AbortSignal,
): Promise<string> {
  if (pkg.access !== "api") return pkg.browserDownloadUrl;
  const what = `resolving the download URL of ${pkg.name}`;
  try {
    return await withRetries(
      { clock: client.clock, policy: client.retry, ...(signal ? { signal } : {}) },
      () => signedUrl(client, pkg.url, pkg.name, signal),
    );
  } catch (err) {
    throw toReposyncError(err, what, signal);
  }
}

async function signedUrl(
  client: GitHubClient,
  url: string,
  name: string,
  signal: AbortSignal | undefined,
): Promise<string> {
  const authorization = client.authorization();
  const response = await client.fetch(url, {
    redirect: "manual",
    headers: {
      "user-agent": "reposync",
      accept: "application/octet-stream",
      "x-github-api-version": GITHUB_API_VERSION,
      ...(authorization ? { authorization } : {}),
    },
    ...(signal ? { signal } : {}),
  });
  const location = response.headers.get("location");
  await response.body?.cancel().catch(() => {});
  if (response.status >= 300 && response.status < 400 && location) {
    return new URL(location, url).toString();
  }
  if (response.status >= 400) {
    throw new GitHubHttpError(
      url,
      response.status,
      headerRecord(response.headers),
      `GET ${name}: HTTP ${response.status}`,
    );
  }
  throw new ReposyncError(
    "GITHUB_HTTP",
    `GET ${name}: expected a redirect to the download, got HTTP ${response.status}`,
  );
}
