import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isReposyncError } from "../../src/errors.js";
import { createGitHubClient, type GitHubClient } from "../../src/github/client.js";
import { TokenBucket } from "../../src/github/token-bucket.js";
import { ContentStore } from "../../src/packages/content-store.js";
import { PackageCache } from "../../src/packages/package-cache.js";
import { createGitHubUpstream, type GitHubPackage } from "../../src/packages/upstream.js";
import { FakeClock } from "../github/fake-clock.js";
import { FakeGitHub } from "../support/fake-github.js";

const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

let fake: FakeGitHub;
let dir: string;

beforeEach(async () => {
  fake = await FakeGitHub.start();
  dir = await mkdtemp(path.join(tmpdir(), "reposync-upstream-"));
});
afterEach(async () => {
  await fake.close();
  await rm(dir, { recursive: true, force: true });
});

function addPackage(content: Uint8Array, isPrivate: boolean): GitHubPackage {
  const name = "hello-1.0-1.x86_64.rpm";
  fake.addRepo({ owner: "o", repo: "r", private: isPrivate });
  const { assetIds } = fake.addRelease("o", "r", { tag: "v1", assets: [{ name, content }] });
  const assetId = assetIds[0] ?? 0;
  return {
    sha256: sha(content),
    size: content.length,
    assetId,
    name,
    url: `${fake.apiUrl}/repos/o/r/releases/assets/${assetId}`,
    browserDownloadUrl: `${fake.webUrl}/o/r/releases/download/v1/${name}`,
    access: isPrivate ? "api" : "browser",
  };
}

function client(options: { token?: string; bucket?: TokenBucket; clock?: FakeClock } = {}) {
  return createGitHubClient({
    baseUrl: fake.apiUrl,
    bucket: options.bucket ?? new TokenBucket({ rate: 1000, burst: 100 }),
    ...(options.token ? { token: options.token } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
    retry: { maxTransientRetries: 0 },
  });
}

function cacheWith(c: GitHubClient): PackageCache<GitHubPackage> {
  return new PackageCache<GitHubPackage>({
    store: new ContentStore({ root: path.join(dir, "packages") }),
    fetchUpstream: createGitHubUpstream({ clientFor: () => c }),
  });
}

describe("createGitHubUpstream", () => {
  it("downloads a public asset from its browser URL and the CDN, sending the token to neither", async () => {
    const content = randomBytes(200_000);
    const pkg = addPackage(content, false);
    const c = client({ token: fake.token });
    const stored = await cacheWith(c).get(pkg);
    expect((await readFile(stored.path)).equals(content)).toBe(true);
    expect(fake.counters.browser).toBe(1);
    expect(fake.counters.downloads).toBe(1);
    expect(fake.seen.every((r) => r.authorization === undefined)).toBe(true);
    expect([...fake.counters.api.values()]).toEqual([]);
    // Both hops went through the bucketed fetch.
    expect(c.counters.other).toBe(2);
  });

  it("downloads a private asset from its API URL with the token, and the CDN never sees it", async () => {
    const content = randomBytes(150_000);
    const pkg = addPackage(content, true);
    const c = client({ token: fake.token });
    const stored = await cacheWith(c).get(pkg);
    expect((await readFile(stored.path)).equals(content)).toBe(true);

    const api = fake.seen.filter((r) => r.server === "api");
    expect(api).toHaveLength(1);
    expect(api[0]?.authorization).toBe(`Bearer ${fake.token}`);
    expect(api[0]?.status).toBe(302);
    const cdn = fake.seen.filter((r) => r.server === "cdn");
    expect(cdn.map((r) => [r.authorization, r.status])).toEqual([[undefined, 200]]);
    expect(fake.counters.cdnAuthRejected).toBe(0);
    expect(c.counters.api).toBe(1);
    expect(c.counters.other).toBe(1);
  });

  it("takes a token from the bucket for every hop, the CDN redirect included", async () => {
    const content = randomBytes(10_000);
    const pkg = addPackage(content, false);
    const clock = new FakeClock();
    const bucket = new TokenBucket({ rate: 1, burst: 1, clock });
    const c = client({ bucket, clock });
    const download = cacheWith(c).get(pkg);
    // The browser hop spent the only token; the CDN hop waits for the next one.
    await clock.sleeping();
    expect(fake.counters.browser).toBe(1);
    expect(fake.counters.cdnRequests).toBe(0);
    await clock.advance(1000);
    expect((await download).size).toBe(content.length);
    expect(fake.counters.cdnRequests).toBe(1);
  });

  it("refuses a download whose Content-Length is not the package's size", async () => {
    const content = randomBytes(10_000);
    const pkg = { ...addPackage(content, false), size: content.length + 1 };
    const upstream = createGitHubUpstream<GitHubPackage>({ clientFor: () => client() });
    const err = await Promise.resolve(upstream(pkg, new AbortController().signal)).catch(
      (e: unknown) => e,
    );
    expect(isReposyncError(err, "UPSTREAM_MISMATCH")).toBe(true);
  });

  it("answers a private asset asked for anonymously with a GitHub HTTP error", async () => {
    const content = randomBytes(1000);
    const pkg = { ...addPackage(content, true), access: "browser" as const };
    const err = await cacheWith(client())
      .get(pkg)
      .catch((e: unknown) => e);
    expect(isReposyncError(err, "GITHUB_HTTP")).toBe(true);
  });
});
