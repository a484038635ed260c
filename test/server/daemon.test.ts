import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import { Daemon } from "../../src/daemon.js";
import { migrate } from "../../src/store/migrate.js";
import { openDatabase } from "../../src/store/open-database.js";
import { sql } from "../../src/store/port.js";
import { addRemote } from "../../src/store/remotes.js";
import { Countdown } from "../packages/deferred.js";
import { HeldUpstream } from "../packages/held-upstream.js";
import { FakeGitHub } from "../support/fake-github.js";
import { fixtureRpm } from "../support/fixtures.js";
import { createTestSchema, havePostgres } from "../support/postgres.js";

const NAME = "fx-files-1.0-1.x86_64.rpm";
const PG = await havePostgres();

/** A pino logger whose lines the test can wait for: an explicit signal of what the daemon did. */
function capturingLogger() {
  const lines: string[] = [];
  const incoming = new Countdown();
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk
        .toString()
        .split("\n")
        .filter((l) => l !== "")) {
        lines.push(line);
        if (line.includes('"msg":"incoming request"')) incoming.bump();
      }
      done();
    },
  });
  return { logger: pino({ level: "info" }, stream), lines, incoming };
}

let gh: FakeGitHub;
beforeAll(async () => {
  gh = await FakeGitHub.start();
});
afterAll(async () => {
  await gh.close();
});

describe("the daemon", () => {
  let dir: string;
  const daemons: Daemon[] = [];
  const upstreams: HeldUpstream[] = [];
  afterEach(async () => {
    for (const d of daemons.splice(0)) await d.stop();
    for (const u of upstreams.splice(0)) await u.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function newDaemon(
    extra: { coldWait?: string; database?: string; shareDir?: boolean } = {},
  ) {
    if (!extra.shareDir) dir = await mkdtemp(path.join(tmpdir(), "reposync-daemon-"));
    const config = loadConfig({
      env: {},
      flags: {
        ...(extra.database ? { database: extra.database } : {}),
        dataDir: dir,
        listen: "127.0.0.1:0",
        githubApiUrl: gh.apiUrl,
        githubSyncRate: "1000",
        githubSyncBurst: "1000",
        coldWait: extra.coldWait ?? "30s",
      },
    });
    const log = capturingLogger();
    const daemon = new Daemon({
      config,
      logger: log.logger,
      tokenFor: () => undefined,
      drainMs: 200,
      cacheGraceMs: 0,
    });
    daemons.push(daemon);
    return { daemon, config, ...log };
  }

  it("start() and stop() are idempotent; after stop the port is closed", async () => {
    const { daemon } = await newDaemon();
    const [a, b] = await Promise.all([daemon.start(), daemon.start()]);
    expect(a).toBe(b);
    expect((await fetch(`${a}/readyz`)).status).toBe(200);
    expect((await fetch(`${a}/healthz`)).status).toBe(200);
    await Promise.all([daemon.stop(), daemon.stop()]);
    await daemon.stop();
    await expect(fetch(`${a}/healthz`)).rejects.toThrow();
  });

  it("primes a remote added before start and serves it; stop() answers a cold wait and a waiting download with 503 at once", async () => {
    const { daemon, config, incoming } = await newDaemon();
    gh.addRepo({ owner: "acme", repo: "daemon1" });
    const content = readFileSync(fixtureRpm(NAME));
    const release = gh.addRelease("acme", "daemon1", {
      tag: "v1",
      assets: [{ name: NAME, content }],
    });
    gh.addRepo({ owner: "acme", repo: "never" });
    const db = await openDatabase(config.database);
    await migrate(db);
    const base = {
      apiUrl: null,
      tokenEnv: null,
      include: [],
      exclude: [],
      prereleases: false,
      intervalMs: 300_000,
      packageMode: "cache" as const,
    };
    await addRemote(db, { ...base, name: "daemon1", repo: "acme/daemon1" });
    const url = await daemon.start();

    // The first request waits for the prime and gets the repodata.
    expect((await fetch(`${url}/daemon1/repodata/repomd.xml`)).status).toBe(200);

    // A download held open upstream, and a remote whose listing never answers (a cold wait).
    const upstream = await HeldUpstream.start(content);
    upstreams.push(upstream);
    await db.exec(
      sql(
        "update release_assets set download_url = $1, api_url = null where asset_id = $2",
        upstream.url,
        release.assetIds[0] ?? 0,
      ),
    );
    gh.fault({ target: "api", path: /\/repos\/acme\/never\/releases$/, status: 0, hang: true });
    await addRemote(db, { ...base, name: "never", repo: "acme/never" });
    await db.close();

    const seen = incoming.count;
    const download = fetch(`${url}/daemon1/packages/${release.assetIds[0]}/${NAME}`);
    const cold = fetch(`${url}/never/repodata/repomd.xml`);
    await Promise.all([upstream.requests.reached(1), incoming.reached(seen + 2)]);

    await daemon.stop();
    const [d, c] = await Promise.all([download, cold]);
    expect(d.status).toBe(503);
    expect(c.status).toBe(503);
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
  });

  it.skipIf(!PG)(
    "two replicas on one Postgres database and one store download a package missed on both once",
    async () => {
      const schema = await createTestSchema();
      try {
        const a = await newDaemon({ database: schema.url });
        const b = await newDaemon({ database: schema.url, shareDir: true });
        gh.addRepo({ owner: "acme", repo: "replicas" });
        const content = readFileSync(fixtureRpm(NAME));
        const release = gh.addRelease("acme", "replicas", {
          tag: "v1",
          assets: [{ name: NAME, content }],
        });
        const db = await openDatabase(schema.url);
        try {
          await migrate(db);
          await addRemote(db, {
            name: "replicas",
            repo: "acme/replicas",
            apiUrl: null,
            tokenEnv: null,
            include: [],
            exclude: [],
            prereleases: false,
            intervalMs: 300_000,
            packageMode: "cache",
          });
          const [urlA, urlB] = await Promise.all([a.daemon.start(), b.daemon.start()]);
          expect((await fetch(`${urlA}/replicas/repodata/repomd.xml`)).status).toBe(200);
          const upstream = await HeldUpstream.start(content);
          upstreams.push(upstream);
          await db.exec(
            sql(
              "update release_assets set download_url = $1, api_url = null where asset_id = $2",
              upstream.url,
              release.assetIds[0] ?? 0,
            ),
          );
          const pkg = `/replicas/packages/${release.assetIds[0]}/${NAME}`;
          const answers = [urlA, urlB, urlA, urlB].map((u) =>
            fetch(`${u}${pkg}`).then(async (r) => ({
              status: r.status,
              body: Buffer.from(await r.arrayBuffer()),
            })),
          );
          await upstream.requests.reached(1);
          upstream.release();
          for (const res of await Promise.all(answers)) {
            expect(res.status).toBe(200);
            expect(res.body.equals(content)).toBe(true);
          }
          expect(upstream.requests.count).toBe(1);
        } finally {
          await db.close();
          await a.daemon.stop();
          await b.daemon.stop();
        }
      } finally {
        await schema.drop();
      }
    },
  );
});
