import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/github/clock.js";
import { latestSnapshot } from "../../src/store/snapshots.js";
import { runSync } from "../../src/sync/sync-job.js";
import { FakeClock, settle } from "../github/fake-clock.js";
import { DIALECTS, useFreshDatabase } from "../store/harness.js";
import { FakeGitHub } from "../support/fake-github.js";
import { fixtureRpm } from "../support/fixtures.js";
import { newRemote, syncDeps } from "../sync/harness.js";
import { syncedRemote, type TestServer, testServer } from "./harness.js";

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

function repodataNames(repomd: string): string[] {
  return [...repomd.matchAll(/<location href="repodata\/([^"]+)"/g)].map((m) => m[1] ?? "");
}

let gh: FakeGitHub;
beforeAll(async () => {
  gh = await FakeGitHub.start();
});
afterAll(async () => {
  await gh.close();
});

describe.each(DIALECTS)("repodata routes on %s", (dialect) => {
  const t = useFreshDatabase(dialect);
  const servers: TestServer[] = [];
  const serve = async (
    ...args: Parameters<typeof testServer> extends [unknown, unknown, ...infer R] ? R : never
  ) => {
    const s = await testServer(t.db(), gh, ...args);
    servers.push(s);
    return s;
  };
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });

  it("serves the stored repomd.xml with no-cache and an ETag, 304 when it matches, and HEAD without a body", async () => {
    const remote = await syncedRemote(t.db(), gh);
    const { app } = await serve();
    const stored = await latestSnapshot(t.db(), remote.name);
    const res = await app.inject(`/${remote.name}/repodata/repomd.xml`);
    expect(res.statusCode).toBe(200);
    expect(res.rawPayload.equals(stored?.repomd ?? Buffer.alloc(0))).toBe(true);
    expect(res.headers["cache-control"]).toBe("no-cache");
    expect(res.headers["content-type"]).toMatch(/^text\/xml/);
    const etag = String(res.headers.etag);
    expect(etag).toBe(`"${sha256(res.rawPayload)}"`);

    const again = await app.inject({
      url: `/${remote.name}/repodata/repomd.xml`,
      headers: { "if-none-match": etag },
    });
    expect(again.statusCode).toBe(304);
    expect(again.rawPayload.length).toBe(0);

    const stale = await app.inject({
      url: `/${remote.name}/repodata/repomd.xml`,
      headers: { "if-none-match": '"something-else"' },
    });
    expect(stale.statusCode).toBe(200);

    const head = await app.inject({ method: "HEAD", url: `/${remote.name}/repodata/repomd.xml` });
    expect(head.statusCode).toBe(200);
    expect(head.rawPayload.length).toBe(0);
    expect(Number(head.headers["content-length"])).toBe(res.rawPayload.length);
  });

  it("serves every file repomd.xml names, as immutable, with bytes that hash to the name", async () => {
    const remote = await syncedRemote(t.db(), gh);
    const { app } = await serve();
    const repomd = (await app.inject(`/${remote.name}/repodata/repomd.xml`)).body;
    const names = repodataNames(repomd);
    expect(names).toHaveLength(3);
    for (const name of names) {
      const res = await app.inject(`/${remote.name}/repodata/${name}`);
      expect(res.statusCode, name).toBe(200);
      expect(name.startsWith(`${sha256(res.rawPayload)}-`)).toBe(true);
      expect(res.headers["cache-control"]).toContain("immutable");
      const ranged = await app.inject({
        url: `/${remote.name}/repodata/${name}`,
        headers: { range: "bytes=0-9" },
      });
      expect(ranged.statusCode).toBe(206);
      expect(ranged.rawPayload.equals(res.rawPayload.subarray(0, 10))).toBe(true);
    }
    const missing = await app.inject(`/${remote.name}/repodata/${"0".repeat(64)}-primary.xml.gz`);
    expect(missing.statusCode).toBe(404);
  });

  it("keeps serving the files of a replaced snapshot for an hour, and not after", async () => {
    const remote = await syncedRemote(t.db(), gh);
    const before = (await latestSnapshot(t.db(), remote.name))?.repomd.toString("utf8") ?? "";
    gh.addRelease(remote.owner, remote.repo, {
      tag: "v2",
      assets: [
        { name: "fx-deps.rpm", content: readFileSync(fixtureRpm("fx-deps-1.0-1.x86_64.rpm")) },
      ],
    });
    const report = await runSync(syncDeps(t.db(), gh, { clock: systemClock }), remote.name, {
      prime: true,
    });
    expect(report.status).toBe("ok");
    const after = (await latestSnapshot(t.db(), remote.name))?.repomd.toString("utf8") ?? "";
    const oldPrimary = repodataNames(before).find((n) => n.endsWith("-primary.xml.gz")) ?? "";
    const newPrimary = repodataNames(after).find((n) => n.endsWith("-primary.xml.gz")) ?? "";
    expect(oldPrimary).not.toBe(newPrimary);

    const now = await serve();
    expect((await now.app.inject(`/${remote.name}/repodata/repomd.xml`)).body).toBe(after);
    expect((await now.app.inject(`/${remote.name}/repodata/${oldPrimary}`)).statusCode).toBe(200);

    const later = await serve({ clock: new FakeClock(Date.now() + 61 * 60_000) });
    expect((await later.app.inject(`/${remote.name}/repodata/${oldPrimary}`)).statusCode).toBe(404);
    expect((await later.app.inject(`/${remote.name}/repodata/${newPrimary}`)).statusCode).toBe(200);
  });

  it("answers /<remote>.repo with a baseurl, metadata_expire from the interval, and the dnf 4 and 5 commands", async () => {
    const remote = await syncedRemote(t.db(), gh, { intervalMs: 90_000 });
    const { app } = await serve();
    const res = await app.inject({
      url: `/${remote.name}.repo`,
      headers: { host: "repo.test:8080" },
    });
    expect(res.statusCode).toBe(200);
    const lines = res.body.split("\n");
    const settings = new Map(
      lines
        .filter((l) => l.includes("=") && !l.startsWith("#"))
        .map((l) => {
          const i = l.indexOf("=");
          return [l.slice(0, i), l.slice(i + 1)] as const;
        }),
    );
    expect(lines).toContain(`[${remote.name}]`);
    expect(settings.get("baseurl")).toBe(`http://repo.test:8080/${remote.name}/`);
    expect(settings.get("metadata_expire")).toBe("90");
    expect(settings.get("enabled")).toBe("1");
    const comments = lines.filter((l) => l.startsWith("#")).join("\n");
    expect(comments).toContain(
      `dnf config-manager --add-repo http://repo.test:8080/${remote.name}.repo`,
    );
    expect(comments).toContain(
      `dnf config-manager addrepo --from-repofile=http://repo.test:8080/${remote.name}.repo`,
    );
  });

  it("answers 404 for a remote that does not exist, on every route", async () => {
    const { app } = await serve();
    for (const url of [
      "/nope/repodata/repomd.xml",
      `/nope/repodata/${"a".repeat(64)}-primary.xml.gz`,
      "/nope/packages/1001/x.rpm",
      "/nope.repo",
      "/nope",
    ]) {
      expect((await app.inject(url)).statusCode, url).toBe(404);
    }
  });

  it("refuses path traversal and malformed names with 400 or 404, reading nothing outside the store", async () => {
    const remote = await syncedRemote(t.db(), gh);
    const { app } = await serve();
    const id = remote.assets.get("fx-files-1.0-1.x86_64.rpm")?.id ?? 0;
    const urls = [
      "/../../../../etc/passwd",
      "/..%2F..%2F..%2Fetc%2Fpasswd/repodata/repomd.xml",
      "/%2e%2e/repodata/repomd.xml",
      `/${remote.name}/repodata/..%2F..%2F..%2Fetc%2Fpasswd`,
      `/${remote.name}/repodata/%2e%2e`,
      `/${remote.name}/repodata/.hidden`,
      `/${remote.name}/repodata/../../../../etc/passwd`,
      `/${remote.name}/packages/${id}/..%2F..%2F..%2Fetc%2Fpasswd`,
      `/${remote.name}/packages/${id}/%2e%2e`,
      `/${remote.name}/packages/..%2F..%2Fetc/passwd`,
      `/${remote.name}/packages/-1/fx-files-1.0-1.x86_64.rpm`,
      `/${remote.name}/packages/0x10/fx-files-1.0-1.x86_64.rpm`,
      `/${remote.name}/packages/${id}/fx-noarch-2.5-3.noarch.rpm`,
      `/${remote.name}/packages/${id}/fx-files-1.0-1.x86_64.rpm%00.txt`,
      `/${remote.name}/packages/99999999999999999999/x.rpm`,
      "/%00/repodata/repomd.xml",
      "/UPPER/repodata/repomd.xml",
      "/..%2Fetc%2Fpasswd.repo",
      "/%2e%2e.repo",
      `/${remote.name}/repodata/%ZZ`,
    ];
    for (const url of urls) {
      const res = await app.inject(url);
      expect([400, 404], `${url} -> ${res.statusCode}`).toContain(res.statusCode);
      expect(res.body).not.toContain("root:");
    }
    // Nothing was downloaded or stored for any of them.
    expect(gh.counters.downloads).toBe(0);
  });
});

describe("a cold remote (no snapshot yet)", () => {
  const t = useFreshDatabase("sqlite");
  const servers: TestServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });

  it("enqueues a prime, waits, and serves the snapshot to every waiting request when it lands in time", async () => {
    const { name } = await newRemote(t.db(), gh);
    const server = await testServer(t.db(), gh);
    servers.push(server);
    const requests = [1, 2, 3].map(() => server.app.inject(`/${name}/repodata/repomd.xml`));
    await server.primed.reached(3);
    expect(server.primes).toEqual([name, name, name]);

    const report = await runSync(syncDeps(t.db(), gh, { clock: systemClock }), name, {
      prime: true,
    });
    expect(report.status).toBe("ok");
    server.synced(name);

    const stored = await latestSnapshot(t.db(), name);
    for (const res of await Promise.all(requests)) {
      expect(res.statusCode).toBe(200);
      expect(res.rawPayload.equals(stored?.repomd ?? Buffer.alloc(0))).toBe(true);
    }
    expect(
      await server.metrics.registry.getSingleMetricAsString("reposync_cold_waits_total"),
    ).toMatch(/outcome="served"} 3/);
  });

  /** A cold remote and two requests for its repomd.xml, both waiting on a clock that stands still. */
  async function twoColdWaits() {
    const { name } = await newRemote(t.db(), gh);
    const clock = new FakeClock(Date.now());
    const server = await testServer(t.db(), gh, { clock, coldWaitMs: 10_000 });
    servers.push(server);
    const requests = [1, 2].map(() => server.app.inject(`/${name}/repodata/repomd.xml`));
    for (let i = 0; i < 1000 && clock.pending < 2; i++) await settle();
    expect(clock.pending).toBe(2);
    return { name, clock, server, requests };
  }

  it("answers 503 with Retry-After once the wait is over, to every request, when no snapshot landed", async () => {
    const { name, clock, server, requests } = await twoColdWaits();
    await clock.advance(10_000);
    for (const res of await Promise.all(requests)) {
      expect(res.statusCode).toBe(503);
      expect(res.headers["retry-after"]).toBe("10");
    }
    expect(server.primes).toEqual([name, name]);
  });

  it("answers 503 at once, naming the reason, when the first sync fails during the wait", async () => {
    const { name, server, requests } = await twoColdWaits();
    // The clock never moves: only the failure can end these waits.
    server.synced(name, "listing releases: 404 Not Found");
    for (const res of await Promise.all(requests)) {
      expect(res.statusCode).toBe(503);
      expect(res.headers["retry-after"]).toBe("10");
      expect(res.body).toMatch(/first sync .* failed: listing releases: 404 Not Found/);
    }
    expect(
      await server.metrics.registry.getSingleMetricAsString("reposync_cold_waits_total"),
    ).toMatch(/outcome="failed"} 2/);
  });
});
