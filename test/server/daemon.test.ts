import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { Agent } from "node:http";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import { Daemon } from "../../src/daemon.js";
import { migrate } from "../../src/store/migrate.js";
import { openDatabase } from "../../src/store/open-database.js";
import { type Queryable, sql } from "../../src/store/port.js";
import { addRemote } from "../../src/store/remotes.js";
import { Countdown } from "../packages/deferred.js";
import { HeldUpstream } from "../packages/held-upstream.js";
import { basicMain, buildRpm } from "../rpm/header-builder.js";
import { FakeGitHub } from "../support/fake-github.js";
import { fixtureRpm, plainRemote } from "../support/fixtures.js";
import { createTestSchema, havePostgres } from "../support/postgres.js";
import { stalledGet } from "../support/stalled-get.js";

const NAME = "fx-files-1.0-1.x86_64.rpm";
const PG = await havePostgres();

/** A pino logger whose lines the test can wait for: an explicit signal of what the daemon did. */
function capturingLogger() {
  const lines: string[] = [];
  const incoming = new Countdown();
  let waiters: { msg: string; done: () => void }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk
        .toString()
        .split("\n")
        .filter((l) => l !== "")) {
        lines.push(line);
        if (line.includes('"msg":"incoming request"')) incoming.bump();
        const ready = waiters.filter((w) => line.includes(`"msg":"${w.msg}"`));
        waiters = waiters.filter((w) => !ready.includes(w));
        for (const w of ready) w.done();
      }
      done();
    },
  });
  /** Resolves once a line with this message was logged. */
  const logged = (msg: string): Promise<void> =>
    lines.some((l) => l.includes(`"msg":"${msg}"`))
      ? Promise.resolve()
      : new Promise((done) => waiters.push({ msg, done }));
  const count = (msg: string) => lines.filter((l) => l.includes(`"msg":"${msg}"`)).length;
  return { logger: pino({ level: "info" }, stream), lines, incoming, logged, count };
}

const CUT = "cutting the responses still in flight";

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

  /** Points the stored download of asset `assetId` at an upstream that holds it until released. */
  async function heldDownload(db: Queryable, assetId: number, content: Buffer) {
    const upstream = await HeldUpstream.start(content);
    upstreams.push(upstream);
    await db.exec(
      sql(
        "update release_assets set download_url = $1, api_url = null where asset_id = $2",
        upstream.url,
        assetId,
      ),
    );
    return upstream;
  }

  async function newDaemon(
    extra: { coldWait?: string; database?: string; shareDir?: boolean; drainMs?: number } = {},
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
      drainMs: extra.drainMs ?? 200,
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
    await addRemote(db, plainRemote("daemon1"));
    const url = await daemon.start();

    // The first request waits for the prime and gets the repodata.
    expect((await fetch(`${url}/daemon1/repodata/repomd.xml`)).status).toBe(200);

    // A download held open upstream, and a remote whose listing never answers (a cold wait).
    const upstream = await heldDownload(db, release.assetIds[0] ?? 0, content);
    gh.fault({ target: "api", path: /\/repos\/acme\/never\/releases$/, status: 0, hang: true });
    await addRemote(db, plainRemote("never"));
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

  /**
   * A started daemon serving one remote whose only package is far larger than the socket
   * buffers of a connection: a client that stops reading keeps its response in flight.
   */
  async function daemonWithLargePackage(repo: string, drainMs: number) {
    const made = await newDaemon({ drainMs });
    const name = "big-1.0-1.x86_64.rpm";
    const content = buildRpm({ main: basicMain("big"), payload: 32 * 1024 * 1024 }).bytes;
    gh.addRepo({ owner: "acme", repo });
    const release = gh.addRelease("acme", repo, { tag: "v1", assets: [{ name, content }] });
    const db = await openDatabase(made.config.database);
    try {
      await migrate(db);
      await addRemote(db, plainRemote(repo, `acme/${repo}`));
    } finally {
      await db.close();
    }
    const url = await made.daemon.start();
    expect((await fetch(`${url}/${repo}/repodata/repomd.xml`)).status).toBe(200);
    return {
      ...made,
      url,
      size: content.length,
      pkg: `${url}/${repo}/packages/${release.assetIds[0]}/${name}`,
    };
  }

  it("stop() cuts a response still in flight when the drain ends: it resolves and the client's body ends short", async () => {
    const { daemon, pkg, size, count } = await daemonWithLargePackage("cut1", 200);
    const stalled = stalledGet(pkg);
    // Headers received: the response is under way, and this client will not read its body.
    expect(await stalled.headers).toEqual({ status: 200, length: size });

    // Without the cut this never resolves: the response can only end by being cut.
    await daemon.stop();
    expect(count(CUT)).toBe(1);
    // The client reads what reached it, then sees its connection end before the body's end.
    const end = await stalled.readToEnd();
    expect(end.complete).toBe(false);
    expect(end.received).toBeLessThan(size);
  });

  // dnf (libcurl) keeps its connections open between requests: once a response ends during the
  // drain, its idle keep-alive connection must be closed then, not held until the drain's end.
  it.each([
    ["a connection of its own", false],
    ["a keep-alive connection", true],
  ])(
    "stop() waits for a response in flight that ends within the drain, over %s: the client gets it in full and nothing is cut",
    async (_label, keepAlive) => {
      // A drain longer than the test's timeout: only the response ending (and its connection
      // closing) can let stop() resolve.
      const { daemon, pkg, size, logged, count } = await daemonWithLargePackage(
        keepAlive ? "drain-ka" : "drain",
        600_000,
      );
      const agent = keepAlive ? new Agent({ keepAlive: true, keepAliveMsecs: 600_000 }) : false;
      try {
        const stalled = stalledGet(pkg, agent);
        expect(await stalled.headers).toEqual({ status: 200, length: size });

        const stopped = daemon.stop();
        await logged("stopping");
        // The client reads on only now that the daemon is stopping.
        const end = await stalled.readToEnd();
        expect(end).toEqual({ received: size, complete: true });
        await stopped;
        expect(count(CUT)).toBe(0);
        expect(count("stopped")).toBe(1);
      } finally {
        if (agent) agent.destroy();
      }
    },
  );

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
          await addRemote(db, plainRemote("replicas", "acme/replicas"));
          const [urlA, urlB] = await Promise.all([a.daemon.start(), b.daemon.start()]);
          expect((await fetch(`${urlA}/replicas/repodata/repomd.xml`)).status).toBe(200);
          const upstream = await heldDownload(db, release.assetIds[0] ?? 0, content);
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
