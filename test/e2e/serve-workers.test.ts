import { execFile } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { get } from "node:http";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  CLI,
  ensureBuilt,
  reposync,
  type ServeProcess,
  startServe,
} from "../server/cli-process.js";
import { FakeGitHub } from "../support/fake-github.js";
import { listFixtureRpms } from "../support/fixtures.js";

const run = promisify(execFile);

/** The route pattern package downloads are counted under in /metrics. */
const PACKAGE_ROUTE = "/:remote/packages/:assetId/:name";

/** The process's state letter and parent pid from /proc/PID/stat, or undefined if it is gone. */
function procStat(pid: number): { state: string; ppid: number } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { state: fields[0] ?? "", ppid: Number(fields[1]) };
}

/** The live (not zombie) child processes of `pid`. */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = procStat(Number(entry));
    if (stat && stat.ppid === pid && stat.state !== "Z") out.push(Number(entry));
  }
  return out.sort((a, b) => a - b);
}

/** The processes whose command line names `dir` (a test's own data dir). */
function processesNaming(dir: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").includes(dir)) {
        out.push(Number(entry));
      }
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

/**
 * Whether `pid` is still running. A zombie counts as gone: it has exited, and once its parent
 * (the primary) is dead nobody may be left to reap it in this sandbox.
 */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return false;
    throw err;
  }
  const stat = procStat(pid);
  return stat !== undefined && stat.state !== "Z";
}

/**
 * Resolves once none of `pids` runs; rejects naming the survivors past `deadlineMs`. Polling is
 * the only way here: no event announces the end of a process that is not our child.
 */
async function allGone(pids: readonly number[], deadlineMs = 20_000): Promise<void> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const alive = pids.filter(isRunning);
    if (alive.length === 0) return;
    if (Date.now() > until) throw new Error(`still running after ${deadlineMs} ms: ${alive}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The JSON log lines written so far (complete lines only). */
function logLines(serve: ServeProcess): Record<string, unknown>[] {
  const lines = serve.output().split("\n").slice(0, -1);
  const out: Record<string, unknown>[] = [];
  for (const line of lines) {
    if (!line.startsWith("{")) continue;
    try {
      out.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // Two processes share the pipe; a line cut by another's write is not ours to judge.
    }
  }
  return out;
}

/** Resolves once `test(output)` holds, re-checked whenever the process writes something. */
function untilOutput(serve: ServeProcess, test: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (!test()) return;
      serve.child.stdout?.off("data", check);
      serve.child.stderr?.off("data", check);
      resolve();
    };
    serve.child.stdout?.on("data", check);
    serve.child.stderr?.on("data", check);
    check();
  });
}

/** One GET over a connection of its own (so that requests spread over the workers). */
function getFresh(url: string): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    get(url, { agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    }).on("error", reject);
  });
}

/**
 * getFresh, also saying which local port the connection came from (the server logs it as
 * `remotePort`, which tells which worker took it), and settling with the error instead of
 * rejecting when the connection breaks.
 */
function getTraced(
  url: string,
): Promise<{ port: number; status: number; body: Buffer } | { port: number; error: Error }> {
  return new Promise((resolve) => {
    let port = 0;
    const req = get(url, { agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({ port, status: res.statusCode ?? 0, body: Buffer.concat(chunks) }),
      );
      res.on("error", (error) => resolve({ port, error }));
    });
    req.on("socket", (socket) => socket.once("connect", () => (port = socket.localPort ?? 0)));
    req.on("error", (error) => resolve({ port, error }));
  });
}

/** The samples of metric `name` in Prometheus text: labels and value, one per line. */
function samples(text: string, name: string): { labels: Record<string, string>; value: number }[] {
  const out: { labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1] as string] = l[2] as string;
    }
    out.push({ labels, value: Number(m[3]) });
  }
  return out;
}

/** Runs `reposync ARGS` to its end, whatever its status. */
async function runToEnd(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | undefined; stdout: string; stderr: string }> {
  return run(process.execPath, [CLI, ...args], {
    env: { ...process.env, ...env },
    timeout: 50_000,
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({
      code: err.code,
      stdout: err.stdout ?? "",
      stderr: err.stderr ?? "",
    }),
  );
}

/** A loopback port held by a plain listener, so that nobody else can listen there. */
async function occupiedPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  return { port: address.port, server };
}

describe("reposync serve --workers N: a cluster of HTTP processes around one engine", () => {
  let gh: FakeGitHub;
  let work: string;
  let fixtures: { name: string; content: Buffer }[];
  /** Every serve this file started and the worker pids seen, killed after each test if left. */
  const started: ServeProcess[] = [];
  const workerPids = new Set<number>();

  beforeAll(async () => {
    ensureBuilt();
    gh = await FakeGitHub.start();
    work = await mkdtemp(path.join(tmpdir(), "reposync-e2e-workers-"));
    fixtures = await Promise.all(
      listFixtureRpms().map(async (p) => ({ name: path.basename(p), content: await readFile(p) })),
    );
  }, 120_000);

  afterEach(async () => {
    // A test that failed while holding downloads must not hold the next one's.
    gh.holdCdn = undefined;
    gh.releaseHeldCdn();
    for (const serve of started.splice(0)) {
      if (serve.child.exitCode === null && serve.child.signalCode === null) {
        await serve.stop("SIGKILL");
      }
    }
    // Workers left behind by a failed test: only ours (their command line names our data dir).
    for (const pid of workerPids) {
      let cmdline = "";
      try {
        cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      } catch {}
      if (cmdline.includes(work) && isRunning(pid)) process.kill(pid, "SIGKILL");
    }
    workerPids.clear();
  });

  afterAll(async () => {
    await gh?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  function envFor(): Record<string, string> {
    return {
      GITHUB_API_URL: gh.apiUrl,
      GITHUB_SYNC_RATE: "1000",
      GITHUB_SYNC_BURST: "1000",
      GITHUB_TOKEN: "",
      REPOSYNC_DATABASE: "",
      REPOSYNC_WORKERS: "",
      REPOSYNC_ADMIN_TOKEN: "",
      STATE_DIRECTORY: "",
      REPOSYNC_LOG_LEVEL: "info",
      REPOSYNC_COLD_WAIT: "30s",
    };
  }

  /** A fake repository `acme/NAME` with one release carrying every fixture RPM; its asset ids. */
  function addFixtureRepo(name: string): Map<string, number> {
    gh.addRepo({ owner: "acme", repo: name });
    const release = gh.addRelease("acme", name, { tag: "v1", assets: fixtures });
    return new Map(fixtures.map((f, i) => [f.name, release.assetIds[i] ?? 0]));
  }

  /** Starts `serve --workers 2` on a fresh data dir holding `remotes` (name → owner/repo). */
  async function startCluster(
    remotes: Record<string, string>,
  ): Promise<{ serve: ServeProcess; workers: number[]; dataDir: string }> {
    const dataDir = await mkdtemp(path.join(work, "data-"));
    const env = envFor();
    for (const [name, repo] of Object.entries(remotes)) {
      await reposync(["--data-dir", dataDir, "add-remote", name, repo], env);
    }
    const serve = await startServe(
      ["--data-dir", dataDir, "--listen", "127.0.0.1:0", "--workers", "2"],
      env,
    );
    started.push(serve);
    const workers = childrenOf(serve.child.pid ?? -1);
    for (const pid of workers) workerPids.add(pid);
    return { serve, workers, dataDir };
  }

  /** The first log line of the primary saying a sync of `remote` ended with `status`. */
  function syncEnded(remote: string, status: "ok" | "error"): RegExp {
    return new RegExp(`"remote":"${remote}","status":"${status}"[^\\n]*"msg":"sync ended"`);
  }

  it("answers the first request for a cold remote once a prime sent over IPC has synced it, and ends a cold wait when the primary says the sync failed", async () => {
    // Not on the fake yet: the first sync (at start) fails, which records an attempt, so the
    // syncer leaves both remotes alone for their 5 minute interval. Only a prime syncs them now.
    const { serve, workers } = await startCluster({ w1: "acme/w1", gone: "acme/gone" });
    expect(workers, "the primary's live children").toHaveLength(2);
    await Promise.all([
      serve.waitFor(syncEnded("w1", "error")),
      serve.waitFor(syncEnded("gone", "error")),
    ]);
    addFixtureRepo("w1");

    // A worker finds no snapshot, waits, and asks the primary for a prime over IPC; the
    // primary's syncer lists the releases again and writes the snapshot.
    const res = await getFresh(`${serve.url}/w1/repodata/repomd.xml`);
    expect(res.status, serve.output()).toBe(200);
    expect(res.body.toString("utf8")).toContain("<repomd");
    const listings = gh.seen.filter(
      (s) => s.server === "api" && /\/repos\/acme\/w1\/releases(\?|$)/.test(s.path),
    );
    expect(listings.map((s) => s.status)).toEqual([404, 200]);

    // A remote whose prime fails: only the primary's "synced" note, with the failure, ends the
    // worker's wait early with the reason; without it the wait would run out (30 s) and say
    // "being synced".
    const failed = await getFresh(`${serve.url}/gone/repodata/repomd.xml`);
    expect(failed.status).toBe(503);
    expect(failed.body.toString("utf8")).toContain('the first sync of remote "gone" failed');

    // Both cold waits were counted in a worker; /metrics (from any worker) sums them all.
    const metrics = await getFresh(`${serve.url}/metrics`);
    const waits = samples(metrics.body.toString("utf8"), "reposync_cold_waits_total");
    expect(Object.fromEntries(waits.map((s) => [s.labels.outcome, s.value]))).toEqual({
      served: 1,
      failed: 1,
    });
    expect(childrenOf(serve.child.pid ?? -1)).toEqual(workers);
  });

  /**
   * A cluster serving `repo`, and 16 requests (each by `get`, over connections of their own)
   * for its package fx-bighdr, all arrived at the workers while the one download from the
   * fake GitHub's CDN is held (the caller releases it).
   */
  async function sixteenOverlappingRequests<T>(repo: string, get: (url: string) => Promise<T>) {
    const assets = addFixtureRepo(repo);
    const { serve } = await startCluster({ [repo]: `acme/${repo}` });
    await serve.waitFor(syncEnded(repo, "ok"));
    const name = "fx-bighdr-1.0-1.x86_64.rpm";
    const assetId = assets.get(name) ?? 0;
    const bytes = fixtures.find((f) => f.name === name)?.content ?? Buffer.alloc(0);
    const url = `/${repo}/packages/${assetId}/${name}`;

    // Hold the whole-file download until every request has arrived, so that they overlap it.
    let downloadStarted: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      downloadStarted = resolve;
    });
    gh.holdCdn = (r) => {
      if (r.assetId !== assetId || r.range !== undefined) return false;
      downloadStarted();
      return true;
    };
    const arrived = () =>
      logLines(serve).filter(
        (l) => l.msg === "incoming request" && (l.req as { url?: string })?.url === url,
      );
    const responses = Array.from({ length: 16 }, () => get(`${serve.url}${url}`));
    await Promise.all([held, untilOutput(serve, () => arrived().length >= 16)]);
    const downloads = () =>
      gh.seen.filter(
        (s) => s.server === "cdn" && s.path === `/assets/${assetId}` && s.range === undefined,
      );
    return { serve, bytes, url, arrived, responses, downloads };
  }

  it("answers 16 concurrent requests for one uncached package, spread over both workers, with one download from GitHub", async () => {
    const { serve, bytes, arrived, responses, downloads } = await sixteenOverlappingRequests(
      "w2",
      getFresh,
    );
    gh.holdCdn = undefined;
    gh.releaseHeldCdn();

    for (const res of await Promise.all(responses)) {
      expect(res.status).toBe(200);
      expect(res.body.equals(bytes)).toBe(true);
    }
    expect(downloads().map((s) => s.status)).toEqual([200]);

    // Which worker took each request: both did, and no one of them took all 16.
    const perWorker = new Map<unknown, number>();
    const reqs = arrived();
    for (const l of reqs) perWorker.set(l.worker, (perWorker.get(l.worker) ?? 0) + 1);
    expect([...perWorker.keys()].sort()).toEqual([1, 2]);
    expect(reqs).toHaveLength(16);

    // Every one of them recorded its duration (fastify logs "request completed" after the
    // metrics hook ran), so /metrics must count all 16 across the two processes.
    const ids = new Set(reqs.map((l) => `${l.worker} ${l.reqId}`));
    await untilOutput(
      serve,
      () =>
        logLines(serve).filter(
          (l) => l.msg === "request completed" && ids.has(`${l.worker} ${l.reqId}`),
        ).length >= 16,
    );
    const metrics = (await getFresh(`${serve.url}/metrics`)).body.toString("utf8");
    const counted = samples(metrics, "reposync_http_request_duration_seconds_count").filter(
      (s) => s.labels.route === PACKAGE_ROUTE,
    );
    expect(counted.map((s) => [s.labels.method, s.labels.status, s.value])).toEqual([
      ["GET", "200", 16],
    ]);
    const cache = Object.fromEntries(
      samples(metrics, "reposync_package_cache_events_total").map((s) => [s.labels.event, s.value]),
    );
    expect(cache.upstream_fetch).toBe(1);
    expect(cache.fetch_error).toBe(0);
  });

  it("keeps a package download going for one worker's requests when the worker that asked first is killed", async () => {
    const { serve, bytes, url, arrived, responses, downloads } = await sixteenOverlappingRequests(
      "w5",
      getTraced,
    );
    // The worker of the first request most likely asked the primary first; it dies while the
    // download it asked for is held.
    const victim = arrived()[0] as { pid: number; worker: number };
    const workerOfPort = new Map(
      arrived().map((l) => [(l.req as { remotePort: number }).remotePort, l.worker]),
    );
    process.kill(victim.pid, "SIGKILL");
    await serve.waitFor(/"msg":"a worker died"/);
    gh.holdCdn = undefined;
    gh.releaseHeldCdn();

    const answers = await Promise.all(responses);
    let survived = 0;
    for (const answer of answers) {
      const worker = workerOfPort.get(answer.port);
      expect(worker, `the worker of port ${answer.port}`).toBeDefined();
      if (worker === victim.worker) {
        expect("error" in answer, "a request the killed worker held").toBe(true);
      } else {
        survived++;
        expect("status" in answer && answer.status, String("error" in answer && answer.error)).toBe(
          200,
        );
        expect("body" in answer && answer.body.equals(bytes)).toBe(true);
      }
    }
    expect(survived, "requests the other worker took").toBeGreaterThan(0);
    // The package is stored: a later request is answered from the cache.
    const later = await getFresh(`${serve.url}${url}`);
    expect(later.status).toBe(200);
    expect(later.body.equals(bytes)).toBe(true);
    expect(downloads().map((s) => s.status)).toEqual([200]);
  });

  it("replaces a worker killed with SIGKILL, answering meanwhile with the other", async () => {
    addFixtureRepo("w3");
    const { serve, workers } = await startCluster({ w3: "acme/w3" });
    expect(workers).toHaveLength(2);
    const [victim, survivor] = workers as [number, number];
    process.kill(victim, "SIGKILL");
    await serve.waitFor(/"msg":"a worker died"/);
    // The replacement may already be forking (at once when the victim had lived 10 s).
    expect(childrenOf(serve.child.pid ?? -1)).not.toContain(victim);

    const during = await getFresh(`${serve.url}/w3/repodata/repomd.xml`);
    expect(during.status, serve.output()).toBe(200);

    await serve.waitFor(/"msg":"a replacement worker is serving"/);
    const now = childrenOf(serve.child.pid ?? -1);
    for (const pid of now) workerPids.add(pid);
    expect(now).toHaveLength(2);
    expect(now).toContain(survivor);
    expect(now).not.toContain(victim);
    for (let i = 0; i < 4; i++) {
      expect((await getFresh(`${serve.url}/healthz`)).status).toBe(200);
    }
    expect(serve.child.exitCode).toBeNull();
  });

  it("stops on SIGTERM to the primary alone with exit status 0, and no worker outlives it", async () => {
    const { serve, workers, dataDir } = await startCluster({});
    expect(workers).toHaveLength(2);
    const code = await serve.stop("SIGTERM");
    expect(code, serve.output()).toBe(0);
    expect(serve.output()).toContain('"msg":"stopped"');
    await allGone(workers);
    await allGone(processesNaming(dataDir));
  });

  it("lets the workers end by themselves when the primary is killed with SIGKILL", async () => {
    const { serve, workers, dataDir } = await startCluster({});
    expect(workers).toHaveLength(2);
    await serve.stop("SIGKILL");
    expect(serve.child.signalCode).toBe("SIGKILL");
    // Node's cluster worker exits on an unexpected disconnect of its IPC channel.
    await allGone(workers);
    await allGone(processesNaming(dataDir));
  });

  it.each(["2", "1"])(
    "says in one line that the port is taken and exits 2 (--workers %s)",
    async (workers) => {
      const { port, server } = await occupiedPort();
      try {
        const dataDir = await mkdtemp(path.join(work, "data-"));
        const res = await runToEnd(
          ["serve", "--data-dir", dataDir, "--workers", workers, "--listen", `127.0.0.1:${port}`],
          { ...envFor(), REPOSYNC_LOG_LEVEL: "warn" },
        );
        expect(res.code, res.stderr + res.stdout).toBe(2);
        const lines = res.stderr.split("\n").filter((l) => l !== "");
        expect(lines, res.stderr).toHaveLength(1);
        expect(lines[0]).toContain(`cannot listen on 127.0.0.1:${port}`);
        expect(lines[0]).toContain("EADDRINUSE");
        expect(lines[0]).toContain("--listen");
        // No worker stays behind listening or holding the database.
        await allGone(processesNaming(dataDir), 5000);
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    },
  );

  it.each(["0", "lots"])("refuses --workers %s with exit status 2 and one line", async (value) => {
    const dataDir = await mkdtemp(path.join(work, "data-"));
    const res = await runToEnd(
      ["serve", "--data-dir", dataDir, "--workers", value, "--listen", "127.0.0.1:0"],
      envFor(),
    );
    expect(res.code).toBe(2);
    const lines = res.stderr.split("\n").filter((l) => l !== "");
    expect(lines, res.stderr).toHaveLength(1);
    expect(lines[0]).toContain("--workers");
    expect(res.stdout).not.toContain("serving on");
  });
});
