import nock from "nock";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { diffAssets, selectCandidateAssets } from "../../src/github/candidate-assets.js";
import { createGitHubClient, type GitHubClient } from "../../src/github/client.js";
import { listReleases, nextLink } from "../../src/github/releases.js";
import { TokenBucket } from "../../src/github/token-bucket.js";

// nock intercepts Node's fetch: nothing leaves the process, and the host is loopback anyway.
const API = "http://127.0.0.1:59999";

function asset(id: number, name: string, extra: Record<string, unknown> = {}) {
  return {
    id,
    name,
    label: null,
    state: "uploaded",
    content_type: "application/x-rpm",
    size: 1000 + id,
    digest: `sha256:${String(id).padStart(64, "0")}`,
    download_count: 0,
    created_at: "2025-07-01T00:00:00Z",
    updated_at: "2025-07-01T00:00:00Z",
    url: `${API}/repos/acme/tools/releases/assets/${id}`,
    browser_download_url: `https://github.test/acme/tools/releases/download/v/${name}`,
    ...extra,
  };
}

function release(id: number, tag: string, assets: unknown[], extra: Record<string, unknown> = {}) {
  return {
    id,
    tag_name: tag,
    name: tag,
    draft: false,
    prerelease: false,
    created_at: "2025-07-01T00:00:00Z",
    published_at: "2025-07-01T00:00:00Z",
    assets,
    ...extra,
  };
}

function client(): GitHubClient {
  return createGitHubClient({
    baseUrl: API,
    token: "t0ken",
    bucket: new TokenBucket({ rate: 1000, burst: 1000 }),
    retry: { maxTransientRetries: 0 },
  });
}

beforeAll(() => nock.disableNetConnect());
afterEach(() => {
  const pending = nock.pendingMocks();
  nock.cleanAll();
  expect(pending).toEqual([]);
});
afterAll(() => nock.enableNetConnect());

const page1 = [release(2, "v2", [asset(21, "tool-2.rpm")])];
const page2 = [release(1, "v1", [asset(11, "tool-1.rpm")])];
const nextUrl = `${API}/repositories/77/releases?per_page=100&page=2`;

describe("listReleases", () => {
  it("follows Link rel=next as given and stores each page's ETag", async () => {
    nock(API, {
      reqheaders: { "x-github-api-version": "2022-11-28", authorization: "token t0ken" },
    })
      .get("/repos/acme/tools/releases")
      .query({ per_page: "100" })
      .reply(200, page1, {
        etag: 'W/"p1"',
        link: `<${nextUrl}>; rel="next", <${nextUrl}>; rel="last"`,
      })
      .get("/repositories/77/releases")
      .query({ per_page: "100", page: "2" })
      .reply(200, page2, { etag: '"p2"' });

    const result = await listReleases(client(), { owner: "acme", repo: "tools" });

    expect(result.notModified).toBe(false);
    expect(result.pages.map((p) => [p.url, p.etag, p.next])).toEqual([
      [`${API}/repos/acme/tools/releases?per_page=100`, 'W/"p1"', nextUrl],
      [nextUrl, '"p2"', null],
    ]);
    expect(result.releases.map((r) => r.tag)).toEqual(["v2", "v1"]);
  });

  it("sends stored ETags verbatim, and a 304 on every page derives nothing", async () => {
    const first = await (async () => {
      nock(API)
        .get("/repos/acme/tools/releases")
        .query(true)
        .reply(200, page1, { etag: 'W/"p1"', link: `<${nextUrl}>; rel="next"` })
        .get("/repositories/77/releases")
        .query(true)
        .reply(200, page2, { etag: '"p2"' });
      return listReleases(client(), { owner: "acme", repo: "tools" });
    })();

    // The 304s carry no Link header: the stored next URL has to be used.
    nock(API, { reqheaders: { "if-none-match": 'W/"p1"' } })
      .get("/repos/acme/tools/releases")
      .query(true)
      .reply(304, "", { etag: 'W/"p1"' });
    nock(API, { reqheaders: { "if-none-match": '"p2"' } })
      .get("/repositories/77/releases")
      .query(true)
      .reply(304, "");

    const second = await listReleases(client(), {
      owner: "acme",
      repo: "tools",
      storedPages: first.pages,
    });
    expect(second.notModified).toBe(true);
    expect(second.notModifiedPages).toBe(2);
    expect(second.pages).toEqual(first.pages);

    const stored = selectCandidateAssets(first.releases);
    const diff = diffAssets(stored, selectCandidateAssets(second.releases));
    expect(diff.added).toEqual([]);
    expect(diff.changed).toEqual([]);
    expect(diff.removed).toEqual([]);
    expect(diff.unchanged.map((a) => a.assetId)).toEqual([21, 11]);
  });

  it("treats a 200 that differs only in download_count as no change", async () => {
    nock(API).get("/repos/acme/tools/releases").query(true).reply(200, page1, { etag: '"a"' });
    const before = await listReleases(client(), { owner: "acme", repo: "tools" });

    const downloaded = [release(2, "v2", [asset(21, "tool-2.rpm", { download_count: 4711 })])];
    nock(API, { reqheaders: { "if-none-match": '"a"' } })
      .get("/repos/acme/tools/releases")
      .query(true)
      .reply(200, downloaded, { etag: '"b"' });
    const after = await listReleases(client(), {
      owner: "acme",
      repo: "tools",
      storedPages: before.pages,
    });

    expect(after.notModified).toBe(false);
    expect(after.pages[0]?.etag).toBe('"b"');
    const diff = diffAssets(
      selectCandidateAssets(before.releases),
      selectCandidateAssets(after.releases),
    );
    expect(diff).toEqual({
      added: [],
      changed: [],
      removed: [],
      unchanged: [expect.objectContaining({ assetId: 21 })],
    });
  });

  it("reports a re-uploaded asset, a new one and a vanished one", async () => {
    nock(API)
      .get("/repos/acme/tools/releases")
      .query(true)
      .reply(200, [release(2, "v2", [asset(21, "a.rpm"), asset(22, "b.rpm")])]);
    const before = await listReleases(client(), { owner: "acme", repo: "tools" });
    nock(API)
      .get("/repos/acme/tools/releases")
      .query(true)
      .reply(200, [
        release(2, "v2", [
          asset(31, "a.rpm", { digest: "sha256:ff", size: 5 }),
          asset(23, "c.rpm"),
        ]),
      ]);
    const after = await listReleases(client(), { owner: "acme", repo: "tools" });
    const diff = diffAssets(
      selectCandidateAssets(before.releases),
      selectCandidateAssets(after.releases),
    );
    expect(diff.changed.map((c) => [c.stored.assetId, c.listed.assetId])).toEqual([[21, 31]]);
    expect(diff.added.map((a) => a.assetId)).toEqual([23]);
    expect(diff.removed.map((a) => a.assetId)).toEqual([22]);
    expect(diff.unchanged).toEqual([]);
  });
});

describe("selectCandidateAssets", () => {
  const releases = [
    release(5, "v5-draft", [asset(51, "x-5.rpm")], { draft: true }),
    release(4, "v4-rc", [asset(41, "x-4.rpm")], { prerelease: true }),
    release(3, "v3", [
      asset(31, "x-3.x86_64.rpm"),
      asset(32, "x-3.src.rpm"),
      asset(33, "x-3.tar.gz"),
      asset(34, "x-debuginfo-3.x86_64.rpm"),
      asset(35, "x-3.aarch64.rpm", { state: "open" }),
      asset(36, "X-3.NOARCH.RPM"),
    ]),
  ];

  it("drops drafts, unfinished uploads, non-RPMs and (by default) prereleases", async () => {
    const names = (await listAndSelect(releases)).map((a) => a.name);
    expect(names).toEqual([
      "x-3.x86_64.rpm",
      "x-3.src.rpm",
      "x-debuginfo-3.x86_64.rpm",
      "X-3.NOARCH.RPM",
    ]);
  });

  it("keeps prereleases when the policy allows them", async () => {
    const names = (await listAndSelect(releases, { prereleases: true })).map((a) => a.name);
    expect(names).toContain("x-4.rpm");
    expect(names).not.toContain("x-5.rpm");
  });

  it("applies include and exclude globs to the asset name", async () => {
    const names = (
      await listAndSelect(releases, {
        include: ["*.x86_64.rpm", "*.src.rpm"],
        exclude: ["*-debuginfo-*"],
      })
    ).map((a) => a.name);
    expect(names).toEqual(["x-3.x86_64.rpm", "x-3.src.rpm"]);
  });
});

/** Runs raw release JSON through the real parser (via a nock'd listing) and the selection. */
async function listAndSelect(raw: unknown[], policy = {}) {
  nock(API).get("/repos/acme/tools/releases").query(true).reply(200, raw);
  const listed = await listReleases(client(), { owner: "acme", repo: "tools" });
  return selectCandidateAssets(listed.releases, policy);
}

describe("nextLink", () => {
  it("picks rel=next among other relations and returns null without one", () => {
    expect(nextLink('<https://a/x?page=1>; rel="prev", <https://a/x?page=3>; rel="next"')).toBe(
      "https://a/x?page=3",
    );
    expect(nextLink('<https://a/x?page=1>; rel="first"')).toBeNull();
    expect(nextLink(undefined)).toBeNull();
  });
});
