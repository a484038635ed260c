#!/usr/bin/env node
// Benchmark: `reposync serve` against nginx serving the same repodata files statically, in one
// run, on loopback. Both answer GET /bench/repodata/repomd.xml and /bench/repodata/<primary>;
// wrk (one thread, CONNECTIONS keep-alive connections, DURATION seconds per target) reports
// requests per second and the 99th percentile latency.
//
// Each side runs in its best shape on this machine, and both shapes of each are shown:
// reposync with --workers WORKERS (default auto: one per CPU) and with one process; nginx
// with WORKERS worker processes and with one. The ratio is reposync's best over nginx's best
// (on a small machine one nginx worker often beats several, which share the CPUs with wrk).
// A bare fastify answering the same bytes from memory in one process is measured beside them:
// the ceiling of the framework per process, which tells reposync's own cost apart from fastify's.
//
// Then the package cache: 50 concurrent requests for 10 packages that are not cached yet must
// cause exactly 10 downloads from (a fake) GitHub, through the --workers server (its workers
// ask the primary's one cache).
//
// Target: reposync >= 0.7 x nginx's requests per second on both files. It prints PASS or FAIL
// but exits 0 (a benchmark reports; CI does not gate on speed), except when the download
// count is wrong, which is a correctness failure (exit 1).
//
// The machine's speed drifts over a run (other processes, CPU frequency), so each server is
// measured ROUNDS times, the rounds interleaved across servers, and the median round counts.
//
//   npm run bench:serve [-- --duration 5 --rounds 3 --connections 32 --workers auto --keep]
//   (--help lists the flags)
//
// Installs wrk and nginx-light with apt-get when they are missing (root, Debian), after reading
// the flags.

import { execFile, execFileSync, spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { parseArgs } from "./args.mjs";

const execFileAsync = promisify(execFile);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const CLI = join(ROOT, "bin", "reposync");
const RATIO_TARGET = 0.7;

/** --workers: auto (one per CPU this process may use) or a whole number of at least 1. */
function workerCount(raw) {
  if (raw === "auto") return Math.min(64, availableParallelism()); // as serve's own auto
  if (!/^\d+$/.test(raw) || Number(raw) < 1) {
    throw new Error("auto or a whole number of at least 1");
  }
  return Number(raw);
}

function have(cmd) {
  return spawnSync("sh", ["-c", `command -v ${cmd}`]).status === 0;
}

function ensureTools() {
  if (have("wrk") && existsSync("/usr/sbin/nginx")) return;
  console.log("installing wrk and nginx-light with apt-get");
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  execFileSync("apt-get", ["update", "-qq"], { stdio: "inherit", env });
  execFileSync("apt-get", ["install", "-y", "-qq", "wrk", "nginx-light"], {
    stdio: "inherit",
    env,
  });
}

/**
 * The test suite's fake GitHub (test/support/fake-github.ts), transpiled on the fly: the bench
 * needs the same upstream the tests use, and it imports nothing but node modules.
 */
async function loadFakeGitHub(work) {
  const { default: ts } = await import("typescript");
  const source = readFileSync(join(ROOT, "test", "support", "fake-github.ts"), "utf8");
  const js = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  const file = join(work, "fake-github.mjs");
  writeFileSync(file, js);
  return (await import(pathToFileURL(file).href)).FakeGitHub;
}

/** Ten distinct packages: the fixture RPMs, then the corpus, by name. */
function benchPackages() {
  const dirs = [
    join(ROOT, "fixtures", "rpms"),
    join(ROOT, "..", "shared", "corpus", "createrepo_c"),
  ];
  const files = dirs
    .filter((d) => existsSync(d))
    .flatMap((d) =>
      readdirSync(d)
        .filter((n) => n.endsWith(".rpm"))
        .sort()
        .map((n) => join(d, n)),
    );
  const seen = new Set();
  const out = [];
  for (const f of files) {
    if (seen.has(basename(f))) continue;
    seen.add(basename(f));
    out.push({ name: basename(f), content: readFileSync(f) });
    if (out.length === 10) break;
  }
  if (out.length < 10) throw new Error("fewer than 10 RPMs found for the package test");
  return out;
}

function startServe(args, env) {
  const child = spawn(
    process.execPath,
    [...(process.env.BENCH_NODE_ARGS ?? "").split(" ").filter(Boolean), CLI, "serve", ...args],
    {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  return new Promise((resolve, reject) => {
    child.stdout.on("data", (d) => {
      out += d;
      const m = /reposync: serving on (http:\/\/\S+)/.exec(out);
      if (m) resolve({ child, url: m[1] });
    });
    child.stderr.on("data", (d) => {
      out += d;
    });
    child.on("exit", (code) => reject(new Error(`reposync serve exited ${code}:\n${out}`)));
  });
}

function stop(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve(child.exitCode);
    child.once("exit", (code) => resolve(code));
    child.kill("SIGTERM");
  });
}

async function freePort() {
  const { createServer } = await import("node:net");
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Parses wrk's summary: requests/s and the 99% latency in milliseconds. */
// Async, not execFileSync: a blocked event loop would miss the server closing this process's
// idle keep-alive connections, and the next fetch on one of them would fail.
async function runWrk(url, { duration, connections }) {
  const { stdout: out } = await execFileAsync(
    "wrk",
    ["-t1", `-c${connections}`, `-d${duration}s`, "--latency", url],
    { encoding: "utf8" },
  );
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  const p99 = /^\s*99%\s+([\d.]+)(us|ms|s)\s*$/m.exec(out);
  const scale = { us: 0.001, ms: 1, s: 1000 };
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0);
  if (non2xx > 0) {
    const probe = spawnSync("curl", ["-s", "-i", url], { encoding: "utf8" }).stdout;
    throw new Error(`${url}: ${non2xx} responses were not 2xx; one now:\n${probe.slice(0, 600)}`);
  }
  return { rps, p99ms: p99 ? Number(p99[1]) * scale[p99[2]] : Number.NaN };
}

async function main() {
  const opts = parseArgs({
    duration: { kind: "int", default: 5, min: 1, help: "seconds wrk measures each target a round" },
    rounds: { kind: "int", default: 3, min: 1, help: "interleaved rounds; the median counts" },
    connections: { kind: "int", default: 32, min: 1, help: "wrk's keep-alive connections" },
    workers: {
      kind: workerCount,
      default: "auto",
      arg: "N|auto",
      help: "reposync's --workers and nginx's worker_processes (auto: one per CPU)",
    },
    keep: { kind: "boolean", help: "keep the temp folder (printed at the end)" },
  });
  ensureTools();
  if (!existsSync(join(ROOT, "dist", "cli", "main.js"))) {
    throw new Error("dist/ is missing: run `npm run build` first");
  }
  const work = mkdtempSync(join(tmpdir(), "reposync-bench-serve-"));
  const FakeGitHub = await loadFakeGitHub(work);
  const gh = await FakeGitHub.start();
  const packages = benchPackages();
  gh.addRepo({ owner: "acme", repo: "bench" });
  const release = gh.addRelease("acme", "bench", { tag: "v1", assets: packages });
  const env = {
    GITHUB_API_URL: gh.apiUrl,
    GITHUB_SYNC_RATE: "1000",
    GITHUB_SYNC_BURST: "1000",
    GITHUB_TOKEN: "",
    REPOSYNC_DATABASE: "",
    STATE_DIRECTORY: "",
  };
  const dataDir = join(work, "state");
  execFileSync(
    process.execPath,
    [CLI, "--data-dir", dataDir, "add-remote", "bench", "acme/bench"],
    {
      env: { ...process.env, ...env },
    },
  );
  // Logging at warn: request logs to a pipe would measure pino, not the server.
  const serveEnv = { ...env, REPOSYNC_LOG_LEVEL: "warn" };
  const serveArgs = ["--data-dir", dataDir, "--listen", "127.0.0.1:0"];
  const serve = await startServe([...serveArgs, "--workers", String(opts.workers)], serveEnv);
  let single;
  const nginxes = [];
  let bare;
  try {
    // The first request waits for the first sync (a cold remote), then everything is stored.
    const repomdUrl = `${serve.url}/bench/repodata/repomd.xml`;
    const repomd = await (await fetch(repomdUrl)).text();
    const primaryName = /<location href="repodata\/([^"]+-primary\.xml\.gz)"/.exec(repomd)?.[1];
    if (!primaryName) throw new Error(`no primary in repomd.xml:\n${repomd}`);
    const primary = Buffer.from(
      await (await fetch(`${serve.url}/bench/repodata/${primaryName}`)).arrayBuffer(),
    );

    // nginx: the same two files, from disk.
    const docroot = join(work, "www");
    mkdirSync(join(docroot, "bench", "repodata"), { recursive: true });
    writeFileSync(join(docroot, "bench", "repodata", "repomd.xml"), repomd);
    writeFileSync(join(docroot, "bench", "repodata", primaryName), primary);
    // nginx's workers run as an unprivileged user; mkdtemp made the folder private to us.
    chmodSync(work, 0o755);
    // nginx with one worker and with as many as reposync has.
    const startNginx = async (workers) => {
      const port = await freePort();
      const conf = join(work, `nginx-${workers}.conf`);
      writeFileSync(
        conf,
        `worker_processes ${workers};
daemon off;
pid ${join(work, `nginx-${workers}.pid`)};
error_log ${join(work, "nginx-error.log")} warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 1000000;
  types { text/xml xml; application/gzip gz; }
  server {
    listen 127.0.0.1:${port};
    root ${docroot};
    etag on;
  }
}
`,
      );
      const child = spawn("/usr/sbin/nginx", ["-c", conf, "-p", work], { stdio: "inherit" });
      nginxes.push(child);
      const url = `http://127.0.0.1:${port}`;
      for (let i = 0; i < 100; i++) {
        const ok = await fetch(`${url}/bench/repodata/repomd.xml`).then(
          (r) => r.ok,
          () => false,
        );
        if (ok) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      return url;
    };
    const nginxUrls = [await startNginx(1)];
    if (opts.workers > 1) nginxUrls.push(await startNginx(opts.workers));
    single = await startServe([...serveArgs, "--workers", "1"], serveEnv);

    // The ceiling of the framework on this machine: fastify answering the same bytes from
    // memory with nothing else (no lookups, no validators, no metrics), in its own process.
    const barePort = await freePort();
    const bareScript = `
      import Fastify from ${JSON.stringify(pathToFileURL(join(ROOT, "node_modules", "fastify", "fastify.js")).href)};
      import { readFileSync } from "node:fs";
      const files = { "repomd.xml": readFileSync(${JSON.stringify(join(docroot, "bench", "repodata", "repomd.xml"))}),
        [${JSON.stringify(primaryName)}]: readFileSync(${JSON.stringify(join(docroot, "bench", "repodata", primaryName))}) };
      const app = Fastify({ logger: false });
      app.get("/:remote/repodata/:file", (req, reply) => { reply.type("application/octet-stream").send(files[req.params.file]); });
      await app.listen({ host: "127.0.0.1", port: ${barePort} });
      console.log("ready");`;
    bare = spawn(process.execPath, ["--input-type=module", "-e", bareScript], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    await new Promise((resolve) => bare.stdout.once("data", resolve));
    const bareUrl = `http://127.0.0.1:${barePort}`;

    // Every configuration measured, per file; the ratio is best over best.
    const ours = [{ label: `reposync --workers ${opts.workers}`, url: serve.url }];
    if (opts.workers > 1) ours.push({ label: "reposync --workers 1", url: single.url });
    const theirs = nginxUrls.map((url, i) => ({
      label: `nginx worker_processes ${i === 0 ? 1 : opts.workers}`,
      url,
    }));
    const ceiling = { label: "bare fastify, 1 process", url: bareUrl };
    const rows = [];
    for (const [file, path] of [
      ["repomd.xml", "/bench/repodata/repomd.xml"],
      [`primary.xml.gz (${primary.length} B)`, `/bench/repodata/${primaryName}`],
    ]) {
      const all = [...ours, ...theirs, ceiling];
      // Warm every server (JIT, caches), then measure each in turn.
      for (const t of all) await runWrk(`${t.url}${path}`, { ...opts, duration: 2 });
      const rounds = new Map(all.map((t) => [t, []]));
      for (let round = 0; round < opts.rounds; round++) {
        for (const t of all) rounds.get(t).push(await runWrk(`${t.url}${path}`, opts));
      }
      const median = (values) => {
        const sorted = [...values].sort((a, b) => a - b);
        return sorted[Math.floor(sorted.length / 2)];
      };
      const results = new Map(
        all.map((t) => {
          const list = rounds.get(t);
          return [
            t,
            {
              rps: median(list.map((m) => m.rps)),
              p99ms: median(list.map((m) => m.p99ms)),
              all: list.map((m) => m.rps),
            },
          ];
        }),
      );
      const best = (list) =>
        list.reduce((a, b) => (results.get(b).rps > results.get(a).rps ? b : a));
      const bestOurs = best(ours);
      const bestTheirs = best(theirs);
      rows.push({ file, all, results, bestOurs, bestTheirs });
    }

    console.log(
      `\nwrk -t1 -c${opts.connections} -d${opts.duration}s, loopback; median of ${opts.rounds} interleaved rounds\n`,
    );
    let pass = true;
    for (const r of rows) {
      const ratio = r.results.get(r.bestOurs).rps / r.results.get(r.bestTheirs).rps;
      pass &&= ratio >= RATIO_TARGET;
      console.log(r.file);
      for (const t of r.all) {
        const m = r.results.get(t);
        const mark = t === r.bestOurs || t === r.bestTheirs ? "*" : " ";
        console.log(
          `  ${mark} ${t.label.padEnd(32)} ${m.rps.toFixed(0).padStart(8)} req/s   p99 ${m.p99ms.toFixed(2).padStart(6)} ms   rounds: ${m.all.map((v) => v.toFixed(0)).join(", ")}`,
        );
      }
      console.log(`    ratio (best reposync / best nginx, marked *): ${ratio.toFixed(2)}`);
    }
    console.log(`throughput >= ${RATIO_TARGET} x nginx: ${pass ? "PASS" : "FAIL"}`);

    // 50 concurrent requests, 5 for each of 10 uncached packages.
    const before = gh.seen.filter((s) => s.server === "cdn" && s.status === 200).length;
    const urls = packages.map(
      (p, i) => `${serve.url}/bench/packages/${release.assetIds[i]}/${p.name}`,
    );
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => {
        const k = i % 10;
        return fetch(urls[k]).then(async (r) => ({
          k,
          status: r.status,
          body: Buffer.from(await r.arrayBuffer()),
        }));
      }),
    );
    const downloads = gh.seen.filter((s) => s.server === "cdn" && s.status === 200).length - before;
    const intact = answers.every((a) => a.status === 200 && a.body.equals(packages[a.k].content));
    console.log(
      `\n50 concurrent requests for 10 uncached packages: ${downloads} upstream downloads, ` +
        `${intact ? "all 50 complete and correct" : "SOME WRONG"}: ${downloads === 10 && intact ? "PASS" : "FAIL"}`,
    );
    if (downloads !== 10 || !intact) process.exitCode = 1;
  } finally {
    for (const n of nginxes) n.kill("SIGQUIT");
    if (single) await stop(single.child);
    if (bare) bare.kill("SIGTERM");
    const code = await stop(serve.child);
    if (code !== 0) console.log(`reposync serve exited ${code} on SIGTERM`);
    await gh.close();
    if (!opts.keep) rmSync(work, { recursive: true, force: true });
    else console.log(`kept ${work}`);
  }
}

await main();
