import { createHash, randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isReposyncError } from "../../src/errors.js";
import { createGitHubClient } from "../../src/github/client.js";
import { TokenBucket } from "../../src/github/token-bucket.js";
import { ContentStore, type StoredPackage } from "../../src/packages/content-store.js";
import { type FetchUpstream, PackageCache } from "../../src/packages/package-cache.js";
import { createGitHubUpstream, type GitHubPackage } from "../../src/packages/upstream.js";
import { FakeClock } from "../github/fake-clock.js";
import { Countdown, deferred } from "./deferred.js";
import { HeldUpstream } from "./held-upstream.js";

const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** Reads a stored package through a reader of its own, as each HTTP response will. */
async function readThroughOwnReader(stored: StoredPackage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of createReadStream(stored.path)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function packageOn(upstream: HeldUpstream, bytes: Uint8Array, assetId = 7): GitHubPackage {
  return packageAt(upstream.url, bytes, assetId);
}

function packageAt(downloadUrl: string, bytes: Uint8Array, assetId = 7): GitHubPackage {
  return {
    sha256: sha(bytes),
    size: bytes.length,
    assetId,
    name: `pkg-${assetId}.rpm`,
    // A public asset: the browser download URL, here the held server.
    browserDownloadUrl: downloadUrl,
    url: "http://127.0.0.1:9/api/v3/repos/o/r/releases/assets/7",
    access: "browser",
  };
}

/**
 * The real store, with one lookup held until the test opens the gate. Lookups of callers that
 * start together are issued synchronously and in order, so `gateAt` = callers + 1 is the
 * leader's recheck: holding it lets every caller join before the fetch runs (and fails).
 */
class GatedStore extends ContentStore {
  opens = 0;
  gateAt = 0;
  readonly gate = deferred();

  override async open(sha256: string): Promise<StoredPackage | undefined> {
    this.opens++;
    if (this.opens === this.gateAt) await this.gate.promise;
    return super.open(sha256);
  }
}

let dir: string;
let store: GatedStore;
let upstreams: HeldUpstream[];
const metrics = () => ({
  hit: new Countdown(),
  miss: new Countdown(),
  upstreamFetch: new Countdown(),
  coalescedWait: new Countdown(),
  fetchError: new Countdown(),
});
let m: ReturnType<typeof metrics>;

/** The real upstream: src/github's bucketed fetch, through createGitHubUpstream. */
function realUpstream(): FetchUpstream<GitHubPackage> {
  const client = createGitHubClient({
    baseUrl: "http://127.0.0.1:9/api/v3",
    bucket: new TokenBucket({ rate: 1000, burst: 100 }),
    retry: { maxTransientRetries: 0 },
  });
  return createGitHubUpstream({ clientFor: () => client });
}

function newCache(
  options: { fetchUpstream?: FetchUpstream<GitHubPackage>; clock?: FakeClock } = {},
): PackageCache<GitHubPackage> {
  return new PackageCache<GitHubPackage>({
    store,
    fetchUpstream: options.fetchUpstream ?? realUpstream(),
    ...(options.clock ? { clock: options.clock } : {}),
    metrics: {
      hit: m.hit.bump,
      miss: m.miss.bump,
      upstreamFetch: m.upstreamFetch.bump,
      coalescedWait: m.coalescedWait.bump,
      fetchError: m.fetchError.bump,
    },
  });
}

async function startUpstream(bytes: Uint8Array): Promise<HeldUpstream> {
  const upstream = await HeldUpstream.start(bytes);
  upstreams.push(upstream);
  return upstream;
}

async function storeFiles(): Promise<string[]> {
  const entries = await readdir(store.root, { recursive: true, withFileTypes: true }).catch(
    () => [],
  );
  return entries.filter((e) => e.isFile()).map((e) => e.name);
}

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "reposync-cache-"));
  store = new GatedStore({ root: path.join(dir, "packages") });
  upstreams = [];
  m = metrics();
});
afterEach(async () => {
  await Promise.all(upstreams.map((u) => u.close()));
  await rm(dir, { recursive: true, force: true });
});

describe("PackageCache", () => {
  it("answers 16 concurrent requests for one uncached package with one upstream download and 16 identical complete byte sequences", async () => {
    const bytes = randomBytes(1 << 20);
    const upstream = await startUpstream(bytes);
    const cache = newCache();
    const pkg = packageOn(upstream, bytes);

    const gets = Array.from({ length: 16 }, () => cache.get(pkg));
    // All 16 are in: one leads the download (held half-way), 15 wait on it.
    await upstream.requests.reached(1);
    await m.coalescedWait.reached(15);
    upstream.release();
    const stored = await Promise.all(gets);

    const bodies = await Promise.all(stored.map(readThroughOwnReader));
    for (const body of bodies) expect(body.equals(bytes)).toBe(true);
    expect(upstream.requests.count).toBe(1);
    expect(m.upstreamFetch.count).toBe(1);
    expect(m.miss.count).toBe(16);
    expect(m.hit.count).toBe(0);

    // From now on a hit: no upstream request at all.
    const again = await cache.get(pkg);
    expect((await readThroughOwnReader(again)).equals(bytes)).toBe(true);
    expect(m.hit.count).toBe(1);
    expect(upstream.requests.count).toBe(1);
    expect(cache.inFlight).toBe(0);
  });

  it("lets a waiting client disconnect mid-download without changing anything for the others, and stores the package", async () => {
    const bytes = randomBytes(512 * 1024);
    const upstream = await startUpstream(bytes);
    const cache = newCache();
    const pkg = packageOn(upstream, bytes);

    const leaving = new AbortController();
    const staying = Array.from({ length: 8 }, () => cache.get(pkg));
    const leaver = cache.get(pkg, leaving.signal);
    const more = Array.from({ length: 7 }, () => cache.get(pkg));
    await upstream.requests.reached(1);
    await m.coalescedWait.reached(15);
    leaving.abort();
    const err = await leaver.catch((e: unknown) => e);
    expect((err as Error).name).toBe("AbortError");

    upstream.release();
    const stored = await Promise.all([...staying, ...more]);
    for (const body of await Promise.all(stored.map(readThroughOwnReader))) {
      expect(body.equals(bytes)).toBe(true);
    }
    expect(upstream.requests.count).toBe(1);
    expect(upstream.disconnects.count).toBe(0);
    expect(await store.has(pkg.sha256)).toBe(true);
  });

  it("finishes and stores the download when the client that started it leaves and nobody else waits", async () => {
    const bytes = randomBytes(256 * 1024);
    const upstream = await startUpstream(bytes);
    const cache = newCache();
    const pkg = packageOn(upstream, bytes);

    const client = new AbortController();
    const leader = cache.get(pkg, client.signal);
    await upstream.requests.reached(1);
    client.abort();
    expect(((await leader.catch((e: unknown) => e)) as Error).name).toBe("AbortError");
    upstream.release();
    await cache.settled();

    expect(upstream.disconnects.count).toBe(0);
    const stored = await store.open(pkg.sha256);
    expect(stored && (await readThroughOwnReader(stored)).equals(bytes)).toBe(true);
    await cache.get(pkg);
    expect(m.hit.count).toBe(1);
    expect(upstream.requests.count).toBe(1);
  });

  it("answers a corrupt upstream with UPSTREAM_MISMATCH to every waiter, stores nothing, and retries on the next request", async () => {
    const bytes = randomBytes(300_000);
    const corrupt = Buffer.from(bytes);
    corrupt[150_000] = (corrupt[150_000] ?? 0) ^ 1;
    const upstream = await startUpstream(corrupt);
    const cache = newCache();
    const pkg = packageOn(upstream, bytes);

    const gets = Array.from({ length: 4 }, () => cache.get(pkg).catch((e: unknown) => e));
    await upstream.requests.reached(1);
    await m.coalescedWait.reached(3);
    upstream.release();
    for (const err of await Promise.all(gets)) {
      expect(isReposyncError(err, "UPSTREAM_MISMATCH")).toBe(true);
    }
    expect(await storeFiles()).toEqual([]);
    expect(cache.inFlight).toBe(0);
    expect(m.fetchError.count).toBe(1);

    // Upstream is fixed: the key was freed, so the next request downloads again.
    upstream.content = bytes;
    const stored = await cache.get(pkg);
    expect((await readThroughOwnReader(stored)).equals(bytes)).toBe(true);
    expect(upstream.requests.count).toBe(2);
  });

  it("refuses an upstream that sends more bytes than the package has, without a Content-Length", async () => {
    const bytes = randomBytes(10_000);
    const upstream = await startUpstream(Buffer.concat([bytes, Buffer.from("trailing")]));
    upstream.chunked = true;
    upstream.release();
    const cache = newCache();
    const err = await cache.get(packageOn(upstream, bytes)).catch((e: unknown) => e);
    expect(isReposyncError(err, "UPSTREAM_MISMATCH")).toBe(true);
    expect(await storeFiles()).toEqual([]);
  });

  it("passes an upstream HTTP error to every waiter and frees the key", async () => {
    const bytes = randomBytes(1000);
    const upstream = await startUpstream(bytes);
    upstream.failWith = 404;
    const cache = newCache();
    const pkg = packageOn(upstream, bytes);
    store.gateAt = 4;
    const gets = Array.from({ length: 3 }, () => cache.get(pkg).catch((e: unknown) => e));
    await m.coalescedWait.reached(2);
    store.gate.resolve();
    const errors = await Promise.all(gets);
    for (const err of errors) expect(isReposyncError(err, "GITHUB_HTTP")).toBe(true);
    expect(new Set(errors).size).toBe(1);
    expect(upstream.requests.count).toBe(1);
    expect(cache.inFlight).toBe(0);

    upstream.failWith = undefined;
    upstream.release();
    expect((await cache.get(pkg)).size).toBe(bytes.length);
    expect(upstream.requests.count).toBe(2);
  });

  it("passes a synchronous throw of fetchUpstream to every waiter and frees the key", async () => {
    const bytes = randomBytes(1000);
    const boom = new Error("no client for this remote");
    let calls = 0;
    const cache = newCache({
      fetchUpstream: () => {
        calls++;
        throw boom;
      },
    });
    const pkg = packageAt("http://127.0.0.1:9/never-asked", bytes);
    store.gateAt = 4;
    const gets = Array.from({ length: 3 }, () => cache.get(pkg).catch((e: unknown) => e));
    await m.coalescedWait.reached(2);
    store.gate.resolve();
    expect(await Promise.all(gets)).toEqual([boom, boom, boom]);
    expect(calls).toBe(1);
    expect(cache.inFlight).toBe(0);
    // Freed: the next request tries again rather than inheriting the failure.
    expect(await cache.get(pkg).catch((e: unknown) => e)).toBe(boom);
    expect(calls).toBe(2);
  });

  it("never shares a download between packages with different digests", async () => {
    const a = randomBytes(100_000);
    const b = randomBytes(100_000);
    const upA = await startUpstream(a);
    const upB = await startUpstream(b);
    const cache = newCache();
    const pa = packageOn(upA, a, 1);
    const pb = packageOn(upB, b, 2);
    const gets = [cache.get(pa), cache.get(pb), cache.get(pa), cache.get(pb)];
    await upA.requests.reached(1);
    await upB.requests.reached(1);
    await m.coalescedWait.reached(2);
    upA.release();
    upB.release();
    const [sa, sb, sa2, sb2] = await Promise.all(gets);
    expect(sa?.sha256).toBe(pa.sha256);
    expect(sa2?.sha256).toBe(pa.sha256);
    expect(sb?.sha256).toBe(pb.sha256);
    expect(sb2?.sha256).toBe(pb.sha256);
    expect(upA.requests.count + upB.requests.count).toBe(2);
    expect(m.upstreamFetch.count).toBe(2);
  });

  it("joins one download for a digest asked in two casings", async () => {
    const bytes = randomBytes(20_000);
    const upstream = await startUpstream(bytes);
    const cache = newCache();
    const pkg = packageOn(upstream, bytes);
    const gets = [cache.get(pkg), cache.get({ ...pkg, sha256: pkg.sha256.toUpperCase() })];
    await m.coalescedWait.reached(1);
    upstream.release();
    await Promise.all(gets);
    expect(upstream.requests.count).toBe(1);
  });

  it("stop() lets a download finish within its grace, then refuses new requests", async () => {
    const bytes = randomBytes(50_000);
    const upstream = await startUpstream(bytes);
    const clock = new FakeClock();
    const cache = newCache({ clock });
    const pkg = packageOn(upstream, bytes);
    const get = cache.get(pkg);
    await upstream.requests.reached(1);
    const stopped = cache.stop();
    expect(cache.stop()).toBe(stopped);
    upstream.release();
    await stopped;
    expect((await get).size).toBe(bytes.length);
    expect(await store.has(pkg.sha256)).toBe(true);
    expect(isReposyncError(await cache.get(pkg).catch((e: unknown) => e), "ABORTED")).toBe(true);
  });

  it("stop() aborts a download still running after its grace, storing nothing", async () => {
    const bytes = randomBytes(50_000);
    const upstream = await startUpstream(bytes);
    const clock = new FakeClock();
    const cache = newCache({ clock });
    const pkg = packageOn(upstream, bytes);
    const get = cache.get(pkg).catch((e: unknown) => e);
    await upstream.requests.reached(1);
    const stopped = cache.stop();
    await clock.advance(10_000);
    await stopped;
    expect(isReposyncError(await get, "ABORTED")).toBe(true);
    expect(cache.inFlight).toBe(0);
    expect(await storeFiles()).toEqual([]);
  });

  it("start() removes stale temporary files and is idempotent", async () => {
    const folder = path.join(store.root, "sha256", "ab");
    await mkdir(folder, { recursive: true });
    const stale = path.join(folder, `.tmp-${"ab".repeat(32)}-1-cccccc`);
    await writeFile(stale, "left by a crash");
    const old = new Date(Date.now() - 2 * 60 * 60_000);
    await utimes(stale, old, old);
    const cache = newCache();
    const started = cache.start();
    expect(cache.start()).toBe(started);
    await started;
    expect(await readdir(folder)).toEqual([]);
  });
});
