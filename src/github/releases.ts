import { ReposyncError } from "../errors.js";
import type { GitHubClient } from "./client.js";

/** The fields of a release asset that reposync keeps; no download_count, it changes all day. */
export interface AssetSummary {
  readonly id: number;
  readonly name: string;
  readonly size: number;
  /** "uploaded" or "open" (an upload in progress). */
  readonly state: string;
  readonly updatedAt: string;
  /** "sha256:<hex>", or null for assets uploaded before GitHub computed digests. */
  readonly digest: string | null;
  readonly contentType: string;
  /** API URL; with `Accept: application/octet-stream` it downloads (private repos too). */
  readonly url: string;
  /** Public download URL; redirects to a short-lived signed CDN URL. 404 on private repos. */
  readonly browserDownloadUrl: string;
}

/** The fields of a release that reposync keeps. */
export interface ReleaseSummary {
  readonly id: number;
  readonly tag: string;
  readonly draft: boolean;
  readonly prerelease: boolean;
  readonly publishedAt: string | null;
  readonly assets: readonly AssetSummary[];
}

/** What one page of the listing held, kept between syncs to make the next one conditional. */
export interface ReleasePage {
  /** The URL the page was fetched from (the first one, or a `Link: rel="next"` as given). */
  readonly url: string;
  /** The ETag verbatim (quotes and `W/` included), or null when none was sent. */
  readonly etag: string | null;
  /** The next page's URL from this page's Link header, or null on the last page. */
  readonly next: string | null;
  readonly releases: readonly ReleaseSummary[];
}

export interface ListReleasesResult {
  /** The new per-page state to store (pages answered 304 carry their stored content). */
  readonly pages: readonly ReleasePage[];
  /** Every release of every page, in listing order (which GitHub does not promise). */
  readonly releases: readonly ReleaseSummary[];
  /** True when every page answered 304: nothing can have changed. */
  readonly notModified: boolean;
  /** Pages answered 200 and 304. */
  readonly fetched: number;
  readonly notModifiedPages: number;
}

export interface ListReleasesOptions {
  readonly owner: string;
  readonly repo: string;
  /** Pages stored by the previous listing; their ETags make this one conditional. */
  readonly storedPages?: readonly ReleasePage[];
  readonly signal?: AbortSignal;
  /** Releases per page (100, GitHub's maximum; smaller only to exercise paging). */
  readonly perPage?: number;
  /** Safety stop against a Link loop; GitHub lists 1000 releases at most (10 pages of 100). */
  readonly maxPages?: number;
}

/** The first page's URL: 100 per page unless told otherwise, the most GitHub gives. */
export function firstReleasesUrl(
  baseUrl: string,
  owner: string,
  repo: string,
  perPage = 100,
): string {
  return `${baseUrl}/repos/${encodeURIComponent(owner)}/${encodeURIComponent(repo)}/releases?per_page=${perPage}`;
}

/**
 * Lists a repository's releases page by page, each page conditional on its stored ETag.
 *
 * octokit.paginate cannot do this (it has no per-page If-None-Match, and a 304 throws), so the
 * loop is ours. Stored pages are matched by URL, not position: the next URL comes from the
 * previous page's Link header, and for a page answered 304 from what that page held before
 * (GitHub's 304 need not repeat the Link header). Only the first 1000 releases can be listed
 * this way; GitHub offers older ones only by tag.
 */
export async function listReleases(
  client: GitHubClient,
  options: ListReleasesOptions,
): Promise<ListReleasesResult> {
  const stored = new Map((options.storedPages ?? []).map((page) => [page.url, page]));
  const maxPages = options.maxPages ?? Math.ceil(2000 / (options.perPage ?? 100));
  const pages: ReleasePage[] = [];
  const seen = new Set<string>();
  let notModifiedPages = 0;
  let url: string | null = firstReleasesUrl(
    client.baseUrl,
    options.owner,
    options.repo,
    options.perPage,
  );
  while (url !== null) {
    if (seen.has(url) || pages.length >= maxPages) {
      throw new ReposyncError(
        "UPSTREAM_MISMATCH",
        `releases of ${options.owner}/${options.repo}: paging did not end after ${pages.length} pages`,
      );
    }
    seen.add(url);
    const previous = stored.get(url);
    const page = await fetchPage(client, url, previous, options.signal);
    if (page === previous) notModifiedPages++;
    pages.push(page);
    url = page.next;
  }
  return {
    pages,
    releases: pages.flatMap((page) => page.releases),
    notModified: notModifiedPages === pages.length,
    fetched: pages.length,
    notModifiedPages,
  };
}

async function fetchPage(
  client: GitHubClient,
  url: string,
  previous: ReleasePage | undefined,
  signal: AbortSignal | undefined,
): Promise<ReleasePage> {
  const headers: Record<string, string> = { accept: "application/vnd.github+json" };
  if (previous?.etag) headers["if-none-match"] = previous.etag;
  try {
    const response = await client.octokit.request({
      method: "GET",
      url,
      headers,
      ...(signal ? { request: { signal } } : {}),
    });
    const etag = response.headers.etag ?? null;
    const next = nextLink(response.headers.link);
    return { url, etag, next, releases: parseReleases(response.data, url) };
  } catch (err) {
    if (previous && (err as { status?: unknown }).status === 304) {
      // 304 may or may not repeat Link; what the page held before still holds.
      const link = (err as { response?: { headers?: Record<string, string> } }).response?.headers
        ?.link;
      return link === undefined ? previous : { ...previous, next: nextLink(link) };
    }
    if ((err as { status?: unknown }).status === 304) {
      throw new ReposyncError("UPSTREAM_MISMATCH", `${url}: 304 to a request with no ETag`, {
        cause: err,
      });
    }
    throw err;
  }
}

/** The `rel="next"` URL of a Link header, as given. */
export function nextLink(link: string | undefined): string | null {
  if (!link) return null;
  for (const part of link.split(",")) {
    const match = /<([^>]*)>(.*)/.exec(part);
    if (!match) continue;
    const rel = match[2]!
      .split(";")
      .map((param) => /^\s*rel\s*=\s*"?([^"]*)"?\s*$/i.exec(param)?.[1])
      .find((value) => value !== undefined);
    if (rel?.toLowerCase().split(/\s+/).includes("next")) return match[1]!;
  }
  return null;
}

function parseReleases(data: unknown, url: string): ReleaseSummary[] {
  if (!Array.isArray(data)) {
    throw new ReposyncError("UPSTREAM_MISMATCH", `${url}: expected a JSON array of releases`);
  }
  return data.map((raw: unknown) => {
    const r = record(raw, url);
    const assets = Array.isArray(r.assets) ? r.assets : [];
    return {
      id: num(r.id, "release id", url),
      tag: String(r.tag_name ?? ""),
      draft: r.draft === true,
      prerelease: r.prerelease === true,
      publishedAt: typeof r.published_at === "string" ? r.published_at : null,
      assets: assets.map((rawAsset: unknown) => {
        const a = record(rawAsset, url);
        return {
          id: num(a.id, "asset id", url),
          name: String(a.name ?? ""),
          size: num(a.size, "asset size", url),
          state: String(a.state ?? ""),
          updatedAt: String(a.updated_at ?? ""),
          digest: typeof a.digest === "string" && a.digest !== "" ? a.digest : null,
          contentType: String(a.content_type ?? ""),
          url: String(a.url ?? ""),
          browserDownloadUrl: String(a.browser_download_url ?? ""),
        };
      }),
    };
  });
}

function record(value: unknown, url: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ReposyncError("UPSTREAM_MISMATCH", `${url}: a release entry is not an object`);
  }
  return value as Record<string, unknown>;
}

function num(value: unknown, what: string, url: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value)) {
    throw new ReposyncError("UPSTREAM_MISMATCH", `${url}: ${what} is not an integer`);
  }
  return value;
}
