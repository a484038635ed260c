import { createHash } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/store/port.js";
import { HeldUpstream } from "../packages/held-upstream.js";
import { useFreshDatabase } from "../store/harness.js";
import { FakeGitHub } from "../support/fake-github.js";
import { type SyncedRemote, syncedRemote, type TestServer, testServer } from "./harness.js";

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const NAME = "fx-bighdr-1.0-1.x86_64.rpm";

let gh: FakeGitHub;
beforeAll(async () => {
  gh = await FakeGitHub.start();
});
afterAll(async () => {
  await gh.close();
});

function wholeDownloads(id: number): number {
  return gh.seen.filter((s) => s.server === "cdn" && s.path === `/assets/${id}` && s.status === 200)
    .length;
}

describe("package routes", () => {
  const t = useFreshDatabase("sqlite");
  const servers: TestServer[] = [];
  const upstreams: HeldUpstream[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
    for (const u of upstreams.splice(0)) await u.close();
  });
  const serve = async () => {
    const s = await testServer(t.db(), gh);
    servers.push(s);
    return s;
  };

  /** Points the asset's download at a held upstream serving `content` (public, no API URL). */
  async function holdAsset(remote: SyncedRemote, content: Uint8Array): Promise<HeldUpstream> {
    const upstream = await HeldUpstream.start(content);
    upstreams.push(upstream);
    const id = remote.assets.get(NAME)?.id ?? 0;
    await t
      .db()
      .exec(
        sql(
          "update release_assets set download_url = $1, api_url = null where remote_name = $2 and asset_id = $3",
          upstream.url,
          remote.name,
          id,
        ),
      );
    return upstream;
  }

  /** A listening server and the URL of the package. */
  async function listening(remote: SyncedRemote): Promise<{ server: TestServer; url: string }> {
    const server = await serve();
    const base = await server.app.listen({ host: "127.0.0.1", port: 0 });
    const id = remote.assets.get(NAME)?.id ?? 0;
    return { server, url: `${base}/${remote.name}/packages/${id}/${NAME}` };
  }

  it("serves a cached package whole, by range, by HEAD and as 304, downloading it from GitHub once", async () => {
    const remote = await syncedRemote(t.db(), gh);
    const { app, metrics } = await serve();
    const { id, bytes } = remote.assets.get(NAME) ?? { id: 0, bytes: Buffer.alloc(0) };
    const url = `/${remote.name}/packages/${id}/${NAME}`;

    const whole = await app.inject(url);
    expect(whole.statusCode).toBe(200);
    expect(whole.rawPayload.equals(bytes)).toBe(true);
    expect(whole.headers["content-type"]).toBe("application/x-rpm");
    expect(whole.headers.etag).toBe(`"${sha256(bytes)}"`);
    expect(whole.headers["accept-ranges"]).toBe("bytes");

    const range = await app.inject({ url, headers: { range: "bytes=100-1123" } });
    expect(range.statusCode).toBe(206);
    expect(range.headers["content-range"]).toBe(`bytes 100-1123/${bytes.length}`);
    expect(range.rawPayload.equals(bytes.subarray(100, 1124))).toBe(true);

    const resume = await app.inject({ url, headers: { range: `bytes=${bytes.length - 10}-` } });
    expect(resume.statusCode).toBe(206);
    expect(resume.rawPayload.equals(bytes.subarray(bytes.length - 10))).toBe(true);

    const suffix = await app.inject({ url, headers: { range: "bytes=-7" } });
    expect(suffix.rawPayload.equals(bytes.subarray(bytes.length - 7))).toBe(true);

    const beyond = await app.inject({ url, headers: { range: `bytes=${bytes.length}-` } });
    expect(beyond.statusCode).toBe(416);
    expect(beyond.headers["content-range"]).toBe(`bytes */${bytes.length}`);

    const staleRange = await app.inject({
      url,
      headers: { range: "bytes=0-9", "if-range": '"another"' },
    });
    expect(staleRange.statusCode).toBe(200);
    expect(staleRange.rawPayload.length).toBe(bytes.length);

    const head = await app.inject({ method: "HEAD", url });
    expect(head.statusCode).toBe(200);
    expect(Number(head.headers["content-length"])).toBe(bytes.length);
    expect(head.rawPayload.length).toBe(0);

    const cached = await app.inject({ url, headers: { "if-none-match": `"${sha256(bytes)}"` } });
    expect(cached.statusCode).toBe(304);

    expect(wholeDownloads(id)).toBe(1);
    const events = await metrics.registry.getSingleMetricAsString(
      "reposync_package_cache_events_total",
    );
    expect(events).toContain('event="upstream_fetch"} 1');
    expect(events).toMatch(/event="hit"} [1-9]/);
  });

  it("answers a redirect remote with a 302 to GitHub's download URL and downloads nothing", async () => {
    const remote = await syncedRemote(t.db(), gh, { packageMode: "redirect" });
    const { app } = await serve();
    const id = remote.assets.get(NAME)?.id ?? 0;
    const res = await app.inject(`/${remote.name}/packages/${id}/${NAME}`);
    expect(res.statusCode).toBe(302);
    expect(res.headers.location).toBe(
      `${gh.webUrl}/${remote.owner}/${remote.repo}/releases/download/v1/${NAME}`,
    );
    expect(wholeDownloads(id)).toBe(0);
  });

  it("answers a redirect remote of a private repo with a 302 to the signed CDN address, never the public URL or our token", async () => {
    const remote = await syncedRemote(t.db(), gh, { packageMode: "redirect" }, { private: true });
    const { app } = await serve();
    const asset = remote.assets.get(NAME);
    const res = await app.inject(`/${remote.name}/packages/${asset?.id}/${NAME}`);
    expect(res.statusCode).toBe(302);
    const location = String(res.headers.location);
    expect(location.startsWith(gh.cdnUrl)).toBe(true);
    expect(location).not.toContain(gh.token);
    // The client follows it without credentials and gets the package.
    const followed = Buffer.from(await (await fetch(location)).arrayBuffer());
    expect(followed.equals(asset?.bytes ?? Buffer.alloc(0))).toBe(true);
    expect(gh.counters.cdnAuthRejected).toBe(0);
  });

  it("answers 16 concurrent requests for one uncached package with one upstream download and 16 identical complete bodies", async () => {
    const remote = await syncedRemote(t.db(), gh);
    const bytes = remote.assets.get(NAME)?.bytes ?? Buffer.alloc(0);
    const upstream = await holdAsset(remote, bytes);
    const { server, url } = await listening(remote);

    const responses = Array.from({ length: 16 }, () =>
      fetch(url).then(async (r) => ({
        status: r.status,
        body: Buffer.from(await r.arrayBuffer()),
      })),
    );
    await Promise.all([upstream.requests.reached(1), server.misses.reached(16)]);
    upstream.release();

    for (const res of await Promise.all(responses)) {
      expect(res.status).toBe(200);
      expect(res.body.equals(bytes)).toBe(true);
    }
    expect(upstream.requests.count).toBe(1);
    expect(await server.store.has(sha256(bytes))).toBe(true);
  });

  it("lets a client disconnect mid-download without changing anything for the others, and stores the package", async () => {
    const remote = await syncedRemote(t.db(), gh);
    const bytes = remote.assets.get(NAME)?.bytes ?? Buffer.alloc(0);
    const upstream = await holdAsset(remote, bytes);
    const { server, url } = await listening(remote);
    const leaving = new AbortController();
    const left = fetch(url, { signal: leaving.signal }).then(
      () => "answered",
      () => "aborted",
    );
    const staying = Array.from({ length: 3 }, () =>
      fetch(url).then(async (r) => ({
        status: r.status,
        body: Buffer.from(await r.arrayBuffer()),
      })),
    );
    await Promise.all([upstream.requests.reached(1), server.misses.reached(4)]);
    leaving.abort();
    expect(await left).toBe("aborted");
    upstream.release();

    for (const res of await Promise.all(staying)) {
      expect(res.status).toBe(200);
      expect(res.body.equals(bytes)).toBe(true);
    }
    expect(upstream.requests.count).toBe(1);
    expect(upstream.disconnects.count).toBe(0);
    expect(await server.store.has(sha256(bytes))).toBe(true);
    // A client that leaves halfway through reading the stored file disturbs nobody either.
    const half = new AbortController();
    const partial = await fetch(url, { signal: half.signal });
    const reader = partial.body?.getReader();
    await reader?.read();
    half.abort();
    const after = await fetch(url);
    expect(Buffer.from(await after.arrayBuffer()).equals(bytes)).toBe(true);
    expect(upstream.requests.count).toBe(1);
  });

  it("answers 502 to every waiter when upstream sends wrong bytes, stores nothing, and serves the package once upstream is right", async () => {
    const remote = await syncedRemote(t.db(), gh);
    const bytes = remote.assets.get(NAME)?.bytes ?? Buffer.alloc(0);
    const corrupt = Buffer.from(bytes);
    corrupt[corrupt.length - 1] = (corrupt[corrupt.length - 1] ?? 0) ^ 0xff;
    const upstream = await holdAsset(remote, corrupt);
    const { server, url } = await listening(remote);

    const responses = Array.from({ length: 4 }, () =>
      fetch(url).then(async (r) => ({ status: r.status, body: await r.text() })),
    );
    await Promise.all([upstream.requests.reached(1), server.misses.reached(4)]);
    upstream.release();
    for (const res of await Promise.all(responses)) {
      expect(res.status).toBe(502);
      expect(res.body).toContain("UPSTREAM_MISMATCH");
    }
    expect(await server.store.has(sha256(bytes))).toBe(false);

    upstream.content = bytes;
    const retry = await fetch(url);
    expect(retry.status).toBe(200);
    expect(Buffer.from(await retry.arrayBuffer()).equals(bytes)).toBe(true);
    expect(upstream.requests.count).toBe(2);
  });
});
