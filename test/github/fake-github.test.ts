import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readAssetHeader } from "../../src/github/assets.js";
import { diffAssets, selectCandidateAssets } from "../../src/github/candidate-assets.js";
import { createGitHubClient, type GitHubClient } from "../../src/github/client.js";
import { listReleases } from "../../src/github/releases.js";
import { TokenBucket } from "../../src/github/token-bucket.js";
import { FakeGitHub, secondaryRateLimitFault } from "../support/fake-github.js";
import { CORPUS_DIR, haveTools } from "../support/tools.js";
import { buildBigHeaderRpm } from "./big-header-rpm.js";
import { FakeClock, settle } from "./fake-clock.js";

/** A bucket that counts what it hands out, to check that every HTTP attempt took a token. */
class CountingBucket extends TokenBucket {
  takes = 0;
  override async take(options: { key?: string; signal?: AbortSignal } = {}): Promise<void> {
    this.takes++;
    await super.take(options);
  }
}

const archer = readFileSync(join(CORPUS_DIR, "Archer-3.4.5-6.x86_64.rpm"));
const rimmer = readFileSync(join(CORPUS_DIR, "Rimmer-1.0.2-2.x86_64.rpm"));
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

let gh: FakeGitHub;
let repoCounter = 0;

beforeAll(async () => {
  gh = await FakeGitHub.start();
});
afterAll(async () => {
  await gh.close();
});

function client(options: { token?: boolean; bucket?: TokenBucket } = {}): GitHubClient {
  return createGitHubClient({
    baseUrl: gh.apiUrl,
    ...(options.token === false ? {} : { token: gh.token }),
    bucket: options.bucket ?? new TokenBucket({ rate: 10_000, burst: 10_000 }),
    // Real waits, made tiny: retry-after seconds count as milliseconds here.
    retry: { retryAfterUnitMs: 1, backoffBaseMs: 1, maxBackoffMs: 5 },
  });
}

/** A fresh repo per test, so counters and ETags never leak between tests. */
function newRepo(input: { private?: boolean } = {}) {
  const repo = `repo${++repoCounter}`;
  gh.addRepo({ owner: "acme", repo, ...input });
  return { owner: "acme", repo, releasesPath: `/api/v3/repos/acme/${repo}/releases` };
}

async function onlyCandidate(c: GitHubClient, owner: string, repo: string) {
  const listed = await listReleases(c, { owner, repo });
  const [asset] = selectCandidateAssets(listed.releases);
  if (!asset) throw new Error("no candidate asset");
  return asset;
}

describe("listing against the fake GitHub", () => {
  it("pages by Link, then answers every page from its ETag with 304 and derives nothing", async () => {
    const { owner, repo, releasesPath } = newRepo();
    for (let i = 1; i <= 5; i++) {
      gh.addRelease(owner, repo, {
        tag: `v${i}`,
        assets: [{ name: `tool-${i}.rpm`, content: rimmer }],
      });
    }
    // A budget large enough that the bucket does not pace these requests (see token-bucket.ts).
    gh.rateLimit = {
      limit: 50_000_000,
      remaining: 40_000_000,
      reset: Math.floor(Date.now() / 1000) + 3600,
    };
    try {
      const c = client();
      const first = await listReleases(c, { owner, repo, perPage: 2 });
      expect(first.pages).toHaveLength(3);
      expect(first.releases.map((r) => r.tag).sort()).toEqual(["v1", "v2", "v3", "v4", "v5"]);
      expect(first.pages[1]?.url).toMatch(
        /\/api\/v3\/repositories\/\d+\/releases\?per_page=2&page=2$/,
      );
      expect(gh.apiRequests(releasesPath)).toBe(1);
      const remainingAfterFirst = gh.rateLimit.remaining;

      const second = await listReleases(c, { owner, repo, perPage: 2, storedPages: first.pages });
      expect(second.notModified).toBe(true);
      expect(second.pages).toEqual(first.pages);
      // Conditional hits made with a token cost no budget.
      expect(gh.rateLimit.remaining).toBe(remainingAfterFirst);
      expect(c.bucket.budget(c.budgetKey)?.remaining).toBe(remainingAfterFirst);

      gh.bumpDownloadCounts();
      const third = await listReleases(c, { owner, repo, perPage: 2, storedPages: second.pages });
      expect(third.notModifiedPages).toBe(0);
      expect(third.pages[0]?.etag).not.toBe(first.pages[0]?.etag);
      const diff = diffAssets(
        selectCandidateAssets(first.releases),
        selectCandidateAssets(third.releases),
      );
      expect([diff.added, diff.changed, diff.removed]).toEqual([[], [], []]);
      expect(diff.unchanged).toHaveLength(5);

      gh.addRelease(owner, repo, { tag: "v6", assets: [{ name: "tool-6.rpm", content: archer }] });
      const fourth = await listReleases(c, { owner, repo, perPage: 2, storedPages: third.pages });
      const added = diffAssets(
        selectCandidateAssets(third.releases),
        selectCandidateAssets(fourth.releases),
      );
      expect(added.added.map((a) => a.name)).toEqual(["tool-6.rpm"]);
      expect(added.changed).toEqual([]);
    } finally {
      gh.rateLimit = null;
    }
  });

  it("copes with an API that sends no rate-limit headers", async () => {
    const { owner, repo } = newRepo();
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "a.rpm", content: rimmer }] });
    const c = client();
    const listed = await listReleases(c, { owner, repo });
    expect(listed.releases).toHaveLength(1);
    expect(c.bucket.budget(c.budgetKey)).toBeUndefined();
  });

  it("retries a 502 and counts the retry against the bucket", async () => {
    const { owner, repo, releasesPath } = newRepo();
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "a.rpm", content: rimmer }] });
    const bucket = new CountingBucket({ rate: 10_000, burst: 10_000 });
    gh.fault({ target: "api", path: /\/releases$/, status: 502, body: { message: "Bad Gateway" } });
    const listed = await listReleases(client({ bucket }), { owner, repo });
    expect(listed.releases).toHaveLength(1);
    expect(gh.apiRequests(releasesPath)).toBe(2);
    expect(bucket.takes).toBe(2);
  });

  it("gives up on 5xx after the configured number of retries", async () => {
    const { owner, repo, releasesPath } = newRepo();
    for (let i = 0; i < 5; i++) gh.fault({ target: "api", path: /\/releases$/, status: 503 });
    const c = createGitHubClient({
      baseUrl: gh.apiUrl,
      token: gh.token,
      bucket: new TokenBucket({ rate: 10_000, burst: 10_000 }),
      retry: { maxTransientRetries: 2, backoffBaseMs: 1 },
    });
    await expect(listReleases(c, { owner, repo })).rejects.toMatchObject({
      code: "GITHUB_HTTP",
      status: 503,
    });
    expect(gh.apiRequests(releasesPath)).toBe(3);
    // Drain the faults this test left queued.
    for (let i = 0; i < 2; i++) await listReleases(client(), { owner, repo }).catch(() => {});
  });

  it("waits out a 403 secondary rate limit as told, then succeeds", async () => {
    const { owner, repo, releasesPath } = newRepo();
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "a.rpm", content: rimmer }] });
    gh.fault({ ...secondaryRateLimitFault(2), path: /\/releases$/ });
    const listed = await listReleases(client(), { owner, repo });
    expect(listed.releases).toHaveLength(1);
    expect(gh.apiRequests(releasesPath)).toBe(2);
  });

  it("waits out a 429 with retry-after, then succeeds", async () => {
    const { owner, repo, releasesPath } = newRepo();
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "a.rpm", content: rimmer }] });
    gh.fault({ target: "api", path: /\/releases$/, status: 429, headers: { "retry-after": "1" } });
    const listed = await listReleases(client(), { owner, repo });
    expect(listed.releases).toHaveLength(1);
    expect(gh.apiRequests(releasesPath)).toBe(2);
  });

  it("fails with GITHUB_RATE_LIMITED when the secondary limit does not lift", async () => {
    const { owner, repo, releasesPath } = newRepo();
    for (let i = 0; i < 4; i++) gh.fault({ ...secondaryRateLimitFault(1), path: /\/releases$/ });
    await expect(listReleases(client(), { owner, repo })).rejects.toMatchObject({
      code: "GITHUB_RATE_LIMITED",
    });
    // The first attempt and three retries (maxRateLimitRetries), none by the transient loop.
    expect(gh.apiRequests(releasesPath)).toBe(4);
  });
});

describe.skipIf(!haveTools("rpmbuild"))("asset reads against the fake GitHub", () => {
  let big: Uint8Array;
  let workDir: string;

  beforeAll(() => {
    workDir = mkdtempSync(join(tmpdir(), "reposync-bigheader-"));
    big = buildBigHeaderRpm(workDir);
  });
  afterAll(() => rmSync(workDir, { recursive: true, force: true }));

  const cdnSeen = (from: number) => gh.seen.slice(from).filter((s) => s.server === "cdn");

  it("reads a header that fits in 64 KiB with one ranged CDN request", async () => {
    const { owner, repo } = newRepo();
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "Archer.rpm", content: archer }] });
    const c = client();
    const asset = await onlyCandidate(c, owner, repo);
    const mark = gh.seen.length;
    const result = await readAssetHeader(c, asset);
    expect(result.pkg.name).toBe("Archer");
    expect(result.sha256).toBe(sha256(archer));
    expect(result.downloaded).toBe(false);
    expect(cdnSeen(mark).map((s) => [s.status, s.range])).toEqual([
      [206, `bytes=0-${archer.length - 1}`],
    ]);
    // The browser URL's redirect plus the CDN read.
    expect(result.requests).toBe(2);
    expect(result.bytes).toBe(archer.length);
  });

  it("reads a header past 64 KiB with exactly one more request, for exactly the missing bytes", async () => {
    const { owner, repo } = newRepo();
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "big.rpm", content: big }] });
    const c = client();
    const asset = await onlyCandidate(c, owner, repo);
    const mark = gh.seen.length;
    const browserBefore = gh.counters.browser;
    const result = await readAssetHeader(c, asset);
    expect(result.pkg.name).toBe("bigheader");
    expect(result.pkg.headerEnd).toBeGreaterThan(65536);
    expect(cdnSeen(mark).map((s) => [s.status, s.range])).toEqual([
      [206, "bytes=0-65535"],
      [206, `bytes=65536-${result.pkg.headerEnd - 1}`],
    ]);
    // The second range goes straight to the CDN URL the first one was redirected to.
    expect(gh.counters.browser - browserBefore).toBe(1);
    expect(result.requests).toBe(3);
    expect(result.bytes).toBe(result.pkg.headerEnd);
  });

  it("reads a private repo's asset with the token on the API only, never at the CDN", async () => {
    const { owner, repo } = newRepo({ private: true });
    const { assetIds } = gh.addRelease(owner, repo, {
      tag: "v1",
      assets: [{ name: "Archer.rpm", content: archer }],
    });
    const c = client();
    const asset = await onlyCandidate(c, owner, repo);
    const mark = gh.seen.length;
    const rejectedBefore = gh.counters.cdnAuthRejected;
    const result = await readAssetHeader(c, asset, { access: "api" });
    expect(result.pkg.name).toBe("Archer");
    const seen = gh.seen.slice(mark);
    const apiHop = seen.find((s) => s.path.endsWith(`/releases/assets/${assetIds[0]}`));
    expect(apiHop?.authorization).toBe(`Bearer ${gh.token}`);
    expect(apiHop?.status).toBe(302);
    const cdn = seen.filter((s) => s.server === "cdn");
    expect(cdn).toHaveLength(1);
    expect(cdn[0]?.authorization).toBeUndefined();
    expect(cdn[0]?.status).toBe(206);
    expect(gh.counters.cdnAuthRejected).toBe(rejectedBefore);
  });

  it("falls back from the 404 browser URL of a private repo to the API URL", async () => {
    const { owner, repo } = newRepo({ private: true });
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "Archer.rpm", content: archer }] });
    const c = client();
    const asset = await onlyCandidate(c, owner, repo);
    const result = await readAssetHeader(c, asset);
    expect(result.pkg.name).toBe("Archer");
    // 404 browser URL, API URL (302), CDN.
    expect(result.requests).toBe(3);
    await expect(readAssetHeader(client({ token: false }), asset)).rejects.toMatchObject({
      code: "GITHUB_HTTP",
      status: 404,
    });
  });

  it("cancels a 200 body from a CDN that ignores Range once the header is in", async () => {
    const { owner, repo } = newRepo();
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "big.rpm", content: big }] });
    const c = client();
    const asset = await onlyCandidate(c, owner, repo);
    const mark = gh.seen.length;
    gh.cdnIgnoresRange = true;
    try {
      const result = await readAssetHeader(c, asset);
      expect(result.pkg.name).toBe("bigheader");
      expect(result.bytes).toBeGreaterThanOrEqual(result.pkg.headerEnd);
      expect(result.bytes).toBeLessThan(big.length / 2);
      expect(result.requests).toBe(2);
      const cdn = cdnSeen(mark);
      expect(cdn.map((s) => s.range)).toEqual(["bytes=0-65535"]);
    } finally {
      gh.cdnIgnoresRange = false;
    }
  });

  it("downloads and hashes an asset without a digest in one streamed request", async () => {
    const { owner, repo } = newRepo();
    gh.addRelease(owner, repo, {
      tag: "v1",
      assets: [{ name: "big.rpm", content: big, digest: null }],
    });
    const c = client();
    const asset = await onlyCandidate(c, owner, repo);
    expect(asset.digest).toBeNull();
    const downloadsBefore = gh.counters.downloads;
    const mark = gh.seen.length;
    const result = await readAssetHeader(c, asset);
    expect(result.downloaded).toBe(true);
    expect(result.sha256).toBe(sha256(big));
    expect(result.pkg.name).toBe("bigheader");
    expect(result.bytes).toBe(big.length);
    expect(gh.counters.downloads - downloadsBefore).toBe(1);
    expect(cdnSeen(mark).map((s) => s.range)).toEqual([undefined]);
  });

  it("retries a 502 from the CDN and a secondary limit on the API download URL", async () => {
    const { owner, repo } = newRepo({ private: true });
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "Archer.rpm", content: archer }] });
    const bucket = new CountingBucket({ rate: 10_000, burst: 10_000 });
    const c = client({ bucket });
    const asset = await onlyCandidate(c, owner, repo);
    gh.fault({ target: "cdn", status: 502 });
    gh.fault({ ...secondaryRateLimitFault(1), path: /\/releases\/assets\// });
    const takesBefore = bucket.takes;
    const result = await readAssetHeader(c, asset, { access: "api" });
    expect(result.pkg.name).toBe("Archer");
    // API 403, API 302, CDN 502, then the CDN URL again (still signed): 206. Every attempt
    // took a token.
    expect(result.requests).toBe(4);
    expect(bucket.takes - takesBefore).toBe(4);
  });

  it("resolves the asset again when the remembered CDN URL has expired", async () => {
    const { owner, repo } = newRepo();
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "big.rpm", content: big }] });
    const c = client();
    const asset = await onlyCandidate(c, owner, repo);
    const mark = gh.seen.length;
    gh.fault({ target: "cdn", nth: 2, status: 403, body: "Request has expired" });
    const result = await readAssetHeader(c, asset);
    expect(result.pkg.name).toBe("bigheader");
    // Browser 302, CDN 206, CDN 403 (expired), browser 302, CDN 206 for the missing rest.
    expect(result.requests).toBe(5);
    expect(cdnSeen(mark).map((s) => [s.status, s.range])).toEqual([
      [206, "bytes=0-65535"],
      [403, `bytes=65536-${result.pkg.headerEnd - 1}`],
      [206, `bytes=65536-${result.pkg.headerEnd - 1}`],
    ]);
  });

  it("has a CDN that refuses requests carrying Authorization (so the tests above mean something)", async () => {
    const { owner, repo } = newRepo();
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "Archer.rpm", content: archer }] });
    const asset = await onlyCandidate(client(), owner, repo);
    const hop = await fetch(asset.browserDownloadUrl, { redirect: "manual" });
    const location = hop.headers.get("location");
    expect(hop.status).toBe(302);
    expect(location?.startsWith(gh.cdnUrl)).toBe(true);
    const refused = await fetch(location!, { headers: { authorization: `Bearer ${gh.token}` } });
    expect(refused.status).toBe(400);
    await refused.body?.cancel();
  });

  it("refuses an asset whose header states another size than GitHub lists", async () => {
    const { owner, repo } = newRepo();
    const padded = Buffer.concat([archer, Buffer.alloc(10)]);
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "Archer.rpm", content: padded }] });
    const c = client();
    const asset = await onlyCandidate(c, owner, repo);
    await expect(readAssetHeader(c, asset)).rejects.toMatchObject({ code: "RPM_SIZE_MISMATCH" });
  });
});

describe("timeouts, aborts and the spent budget", () => {
  it("times out a request that gets no answer, and retries it as transient", async () => {
    const { owner, repo, releasesPath } = newRepo();
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "a.rpm", content: rimmer }] });
    const c = (maxTransientRetries: number) =>
      createGitHubClient({
        baseUrl: gh.apiUrl,
        token: gh.token,
        bucket: new TokenBucket({ rate: 10_000, burst: 10_000 }),
        timeoutMs: 200,
        retry: { maxTransientRetries, backoffBaseMs: 1 },
      });
    gh.fault({ target: "api", path: /\/releases$/, status: 0, hang: true });
    await expect(listReleases(c(0), { owner, repo })).rejects.toMatchObject({ code: "TIMEOUT" });

    gh.fault({ target: "api", path: /\/releases$/, status: 0, hang: true });
    const before = gh.apiRequests(releasesPath);
    const listed = await listReleases(c(1), { owner, repo });
    expect(listed.releases).toHaveLength(1);
    expect(gh.apiRequests(releasesPath) - before).toBe(2);
  });

  it("stops at once, without retrying, when the caller aborts", async () => {
    const { owner, repo, releasesPath } = newRepo();
    gh.fault({ target: "api", path: /\/releases$/, status: 0, hang: true });
    const controller = new AbortController();
    const listing = listReleases(client(), { owner, repo, signal: controller.signal });
    // The fake counts the request as it arrives; abort once it is in flight.
    while (gh.apiRequests(releasesPath) === 0) await settle();
    controller.abort();
    await expect(listing).rejects.toMatchObject({ code: "ABORTED" });
    expect(gh.apiRequests(releasesPath)).toBe(1);
  });

  it("holds a credential's requests until x-ratelimit-reset once its budget is spent", async () => {
    const { owner, repo, releasesPath } = newRepo();
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "a.rpm", content: rimmer }] });
    const clock = new FakeClock(Date.now());
    const reset = Math.floor(Date.now() / 1000) + 120;
    gh.rateLimit = { limit: 60, remaining: 0, reset };
    try {
      const bucket = new TokenBucket({ rate: 10_000, burst: 10_000, clock });
      const c = client({ bucket });
      const listing = listReleases(c, { owner, repo });
      // The 403 taught the bucket that nothing is left until the reset: the retry waits there.
      await clock.sleeping();
      expect(gh.apiRequests(releasesPath)).toBe(1);
      expect(c.bucket.budget(c.budgetKey)).toMatchObject({ remaining: 0, resetAt: reset * 1000 });
      gh.rateLimit.remaining = 60;
      await clock.advance(reset * 1000 + 1000 - clock.now());
      const listed = await listing;
      expect(listed.releases).toHaveLength(1);
      expect(gh.apiRequests(releasesPath)).toBe(2);
    } finally {
      gh.rateLimit = null;
    }
  });
});
