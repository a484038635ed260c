import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { buildServer } from "../../src/server/build-server.js";
import { ServerMetrics } from "../../src/server/metrics.js";
import { migrate } from "../../src/store/migrate.js";
import { openDatabase } from "../../src/store/open-database.js";
import { listRemotes } from "../../src/store/remotes.js";
import { listSyncRecords } from "../../src/store/sync-records.js";
import { useFreshDatabase } from "../store/harness.js";
import { FakeGitHub } from "../support/fake-github.js";
import { syncedRemote, type TestServer, testServer } from "./harness.js";

const TOKEN = "s3cret-admin-token";

let gh: FakeGitHub;
beforeAll(async () => {
  gh = await FakeGitHub.start();
});
afterAll(async () => {
  await gh.close();
});

describe("index page, health, metrics and the admin API", () => {
  const t = useFreshDatabase("sqlite");
  const servers: TestServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });
  const serve = async (overrides: Parameters<typeof testServer>[2] = {}) => {
    const s = await testServer(t.db(), gh, overrides);
    servers.push(s);
    return s;
  };

  it("lists every remote on the index page with its packages, last sync and .repo link", async () => {
    const synced = await syncedRemote(t.db(), gh);
    const { app } = await serve();
    const res = await app.inject({ url: "/", headers: { host: "mirror.test" } });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/html/);
    const record = (await listSyncRecords(t.db())).find((r) => r.remote === synced.name);
    const row = new RegExp(
      `<tr><td>${synced.name}</td><td>acme/${synced.repo}</td><td>3</td><td>([^<]+)</td>`,
    );
    const lastSync = row.exec(res.body)?.[1];
    expect(lastSync).toBe(new Date(record?.lastSyncedAt ?? 0).toISOString().replace(".000Z", "Z"));
    expect(res.body).toContain(`href="/${synced.name}.repo"`);
    expect(res.body).toContain(
      `dnf config-manager --add-repo http://mirror.test/${synced.name}.repo`,
    );
  });

  it("answers /healthz always and /readyz only while the database answers", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "reposync-readyz-"));
    try {
      const db = await openDatabase(path.join(dir, "r.db"));
      await migrate(db);
      const app = buildServer({
        db,
        packages: {
          stored: () => Promise.reject(new Error("unused")),
          redirect: () => Promise.reject(new Error("unused")),
        },
        metrics: new ServerMetrics(),
        enqueuePrime: () => {},
        coldWaitMs: 0,
      });
      expect((await app.inject("/readyz")).statusCode).toBe(200);
      await db.close();
      expect((await app.inject("/readyz")).statusCode).toBe(503);
      expect((await app.inject("/healthz")).statusCode).toBe(200);
      await app.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("exposes request durations, cache events, syncs, cold waits and GitHub figures at /metrics", async () => {
    const synced = await syncedRemote(t.db(), gh);
    const metrics = new ServerMetrics(() => ({
      apiRequests: 12,
      otherRequests: 34,
      bodyBytes: 5678,
      budgets: [
        {
          key: "https://gh.test anonymous",
          limit: 60,
          remaining: 42,
          used: 18,
          resetAt: 0,
          resource: "core",
          observedAt: 0,
        },
      ],
    }));
    const { app } = await serve({ metrics });
    const id = synced.assets.get("fx-files-1.0-1.x86_64.rpm")?.id;
    expect(
      (await app.inject(`/${synced.name}/packages/${id}/fx-files-1.0-1.x86_64.rpm`)).statusCode,
    ).toBe(200);
    metrics.syncReport({ remote: synced.name, status: "skipped", reason: "busy" });
    const res = await app.inject("/metrics");
    expect(res.statusCode).toBe(200);
    const text = res.body;
    expect(text).toMatch(
      /reposync_http_request_duration_seconds_count\{route="\/:remote\/packages\/:assetId\/:name",method="GET",status="200"\} 1/,
    );
    expect(text).toContain('reposync_package_cache_events_total{event="miss"} 1');
    expect(text).toContain('reposync_package_cache_events_total{event="upstream_fetch"} 1');
    expect(text).toContain('reposync_syncs_total{status="skipped"} 1');
    expect(text).toContain('reposync_github_requests_total{target="api"} 12');
    expect(text).toContain("reposync_github_body_bytes_total 5678");
    expect(text).toContain(
      'reposync_github_rate_limit_remaining{key="https://gh.test anonymous"} 42',
    );
    expect(text).toContain("reposync_cold_waits_total");
  });

  it("has no admin API without REPOSYNC_ADMIN_TOKEN", async () => {
    const { app } = await serve();
    const res = await app.inject({ url: "/api/remotes", headers: { authorization: "Bearer x" } });
    expect(res.statusCode).toBe(404);
  });

  it("refuses admin requests without the token, or with another one, with 401", async () => {
    const { app } = await serve({ adminToken: TOKEN });
    expect((await app.inject("/api/remotes")).statusCode).toBe(401);
    for (const authorization of ["Bearer wrong", `Bearer ${TOKEN}x`, TOKEN, `Basic ${TOKEN}`]) {
      const res = await app.inject({ url: "/api/remotes", headers: { authorization } });
      expect(res.statusCode, authorization).toBe(401);
    }
    const del = await app.inject({ method: "DELETE", url: "/api/remotes/x" });
    expect(del.statusCode).toBe(401);
  });

  it("adds, lists, asks to sync and removes remotes through the admin API", async () => {
    const synced = await syncedRemote(t.db(), gh);
    const { app } = await serve({ adminToken: TOKEN });
    const authorization = `Bearer ${TOKEN}`;

    const added = await app.inject({
      method: "POST",
      url: "/api/remotes",
      headers: { authorization },
      payload: { name: "tools", repo: "acme/tools", interval: "90s", include: ["*.x86_64.rpm"] },
    });
    expect(added.statusCode).toBe(201);
    expect(added.json()).toMatchObject({ name: "tools", repo: "acme/tools", intervalMs: 90_000 });
    expect((await listRemotes(t.db())).map((r) => r.name)).toContain("tools");

    const again = await app.inject({
      method: "POST",
      url: "/api/remotes",
      headers: { authorization },
      payload: { name: "tools", repo: "acme/tools" },
    });
    expect(again.statusCode).toBe(409);
    const bad = await app.inject({
      method: "POST",
      url: "/api/remotes",
      headers: { authorization },
      payload: { name: "Bad Name", repo: "acme/tools" },
    });
    expect(bad.statusCode).toBe(400);

    const list = await app.inject({ url: "/api/remotes", headers: { authorization } });
    expect(list.statusCode).toBe(200);
    const names = (list.json() as { remotes: { name: string }[] }).remotes.map((r) => r.name);
    expect(names).toEqual([synced.name, "tools"].sort());

    const sync = await app.inject({
      method: "POST",
      url: `/api/remotes/${synced.name}/sync`,
      headers: { authorization },
    });
    expect(sync.statusCode).toBe(202);
    const record = (await listSyncRecords(t.db())).find((r) => r.remote === synced.name);
    expect(record?.requestedAt).not.toBeNull();

    expect((await app.inject(`/${synced.name}/repodata/repomd.xml`)).statusCode).toBe(200);
    const removed = await app.inject({
      method: "DELETE",
      url: `/api/remotes/${synced.name}`,
      headers: { authorization },
    });
    expect(removed.statusCode).toBe(204);
    expect((await app.inject(`/${synced.name}/repodata/repomd.xml`)).statusCode).toBe(404);
    const twice = await app.inject({
      method: "DELETE",
      url: `/api/remotes/${synced.name}`,
      headers: { authorization },
    });
    expect(twice.statusCode).toBe(404);
  });
});
