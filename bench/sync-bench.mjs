#!/usr/bin/env node
// Benchmark of the syncer's GitHub traffic: one remote with 200 `.rpm` assets (one of them a
// 24 MiB package, one with a main header over 256 KiB) spread over enough releases that the
// listing takes two pages, primed through the per-remote sync job against the fake GitHub, then
// re-synced unchanged. It prints what GitHub saw (API requests, download-URL hops, CDN requests
// and bytes) and the prime's wall time against its lower bound at the configured rate.
//
// Targets (from the syncer issue), each printed PASS or FAIL; the exit code is 0 either way:
// a benchmark reports, CI does not gate on speed.
// - one ranged CDN request per asset whose header (lead + signature + header) fits in 64 KiB,
//   two for the others, and no whole-file download;
// - CDN bytes at most 64 KiB per asset beyond the sum of the header sizes;
// - an unchanged re-sync costs one conditional request per listing page and derives nothing;
// - prime wall time within 10% of its lower bound.
//
//   npm run bench:sync [-- --assets 200 --releases 120 --rate 50 --burst 5 --keep]
//   (--help lists the flags)
//
// How it runs, and why this way: the code under test is the compiled dist/ (what `reposync
// serve` runs), imported by plain node, so the timing carries no test-runner overhead (vitest's
// transform, worker pool and hooks). The fake GitHub (test/support/fake-github.ts) is TypeScript
// that dist/ does not contain; it imports only node: builtins, so TypeScript's transpileModule
// (imported once the flags are read) turns it into one .mjs file in a temp folder, in-process.
// Its types are checked by the project's typecheck already; a second tsc run here would only
// slow the bench down.
//
// The database is SQLite (the embedded default) in a temp folder. The fake sends no rate-limit
// headers (as some GHES do), so only the token bucket paces the requests, which is what the
// lower bound assumes. The 24 MiB RPM is built once with rpmbuild and cached in
// $TMPDIR/reposync-bench-sync/ between runs.

import { execFileSync, spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "./args.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const FIXTURES = join(ROOT, "fixtures", "rpms");
const CORPUS_DIR = join(ROOT, "..", "shared", "corpus", "createrepo_c");
const CACHE_DIR = join(tmpdir(), "reposync-bench-sync");
const BIG_HEADER_FIXTURE = "fx-bighdr-1.0-1.x86_64.rpm";
const BIG_FILE_BYTES = 24 * 1024 * 1024;
const FIRST_READ = 64 * 1024;
const TIME_TARGET = 1.1;

function hasCommand(name) {
  return spawnSync("sh", ["-c", `command -v ${name}`], { stdio: "ignore" }).status === 0;
}

function requirePrerequisites() {
  const problems = [];
  if (!existsSync(join(ROOT, "dist", "sync", "sync-job.js"))) {
    problems.push("dist/ is missing: run `npm run build` first");
  }
  if (!existsSync(CORPUS_DIR)) problems.push(`the corpus folder ${CORPUS_DIR} is missing`);
  if (!existsSync(join(CACHE_DIR, "big-24mib.rpm")) && !hasCommand("rpmbuild")) {
    problems.push("rpmbuild is missing (needed once, to build the 24 MiB RPM)");
  }
  if (problems.length > 0) {
    for (const p of problems) console.error(`bench: ${p}`);
    process.exit(1);
  }
}

/** Imports a module of the compiled reposync. */
const dist = (path) => import(pathToFileURL(join(ROOT, "dist", path)).href);

/** The fake GitHub, transpiled to one .mjs file (see the file comment for why). */
async function loadFakeGitHub(work) {
  const { default: ts } = await import("typescript");
  const source = readFileSync(join(ROOT, "test", "support", "fake-github.ts"), "utf8");
  const out = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    fileName: "fake-github.ts",
  });
  const file = join(work, "fake-github.mjs");
  writeFileSync(file, out.outputText);
  return import(pathToFileURL(file).href);
}

/**
 * A 24 MiB RPM whose payload is random bytes, stored uncompressed (w0.ufdio): the file stays
 * 24 MiB, and a reader that fetched more than the header would show up in the CDN bytes.
 * Built once, then reused from the cache folder.
 */
function bigRpm() {
  const cached = join(CACHE_DIR, "big-24mib.rpm");
  if (existsSync(cached)) return cached;
  const top = mkdtempSync(join(tmpdir(), "reposync-bench-rpmbuild-"));
  try {
    const spec = [
      "Name: bench-big",
      "Version: 1.0",
      "Release: 1",
      "Summary: A 24 MiB package of random bytes",
      "License: MIT",
      "BuildArch: noarch",
      "%define _binary_payload w0.ufdio",
      "%define _build_id_links none",
      "%define debug_package %{nil}",
      "%define __os_install_post %{nil}",
      "",
      "%description",
      "Random, incompressible content, for the sync benchmark.",
      "",
      "%install",
      "mkdir -p %{buildroot}/usr/share/bench-big",
      `head -c ${BIG_FILE_BYTES} /dev/urandom > %{buildroot}/usr/share/bench-big/blob`,
      "",
      "%files",
      "/usr/share/bench-big/blob",
      "",
    ].join("\n");
    const specPath = join(top, "bench-big.spec");
    writeFileSync(specPath, spec);
    process.stdout.write("bench: building the 24 MiB RPM with rpmbuild (cached afterwards) ... ");
    execFileSync("rpmbuild", ["-bb", "--define", `_topdir ${join(top, "top")}`, specPath], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    const rpmDir = join(top, "top", "RPMS", "noarch");
    const built = readdirSync(rpmDir).find((n) => n.endsWith(".rpm"));
    if (!built) throw new Error(`rpmbuild left no RPM in ${rpmDir}`);
    mkdirSync(CACHE_DIR, { recursive: true });
    // Copy then rename: a run interrupted mid-copy must not leave a truncated cache entry.
    copyFileSync(join(rpmDir, built), `${cached}.part`);
    renameSync(`${cached}.part`, cached);
    console.log("done");
    return cached;
  } finally {
    rmSync(top, { recursive: true, force: true });
  }
}

/**
 * Bytes from the start of the file to the end of the main header (lead, signature header and
 * its padding, main header): the least any reader must fetch to parse the header. Computed here
 * from the RPM format, not by the code under test.
 */
function headerEnd(bytes) {
  const magic = (at) => bytes.readUInt32BE(at) === 0x8eade801;
  const lead = 96;
  if (bytes.readUInt32BE(0) !== 0xedabeedb || !magic(lead)) throw new Error("not an RPM");
  let sigEnd = lead + 16 + 16 * bytes.readUInt32BE(lead + 8) + bytes.readUInt32BE(lead + 12);
  sigEnd += (8 - (sigEnd % 8)) % 8;
  if (!magic(sigEnd)) throw new Error("no main header after the signature");
  return sigEnd + 16 + 16 * bytes.readUInt32BE(sigEnd + 8) + bytes.readUInt32BE(sigEnd + 12);
}

/**
 * The assets: the 24 MiB RPM once, fx-bighdr once, and the other fixture and corpus RPMs
 * round-robin for the rest, each under its own name, dealt over the releases in turn.
 */
function planAssets(opts, bigPath) {
  const small = [
    ...readdirSync(FIXTURES)
      .filter((n) => n.endsWith(".rpm") && n !== BIG_HEADER_FIXTURE)
      .map((n) => join(FIXTURES, n)),
    ...readdirSync(CORPUS_DIR)
      .filter((n) => n.endsWith(".rpm"))
      .map((n) => join(CORPUS_DIR, n)),
  ].sort();
  const sources = [bigPath, join(FIXTURES, BIG_HEADER_FIXTURE)];
  for (let i = 0; sources.length < opts.assets; i++) sources.push(small[i % small.length]);
  const contents = new Map();
  const width = String(opts.assets).length;
  return sources.map((path, i) => {
    if (!contents.has(path)) {
      const content = readFileSync(path);
      contents.set(path, { content, headerEnd: headerEnd(content) });
    }
    const { content, headerEnd: end } = contents.get(path);
    return {
      name: `a${String(i).padStart(width, "0")}-${basename(path)}`,
      source: basename(path),
      content,
      headerEnd: end,
      release: i % opts.releases,
    };
  });
}

/** What the fake has counted so far, to subtract one phase from the next. */
function fakeTotals(gh) {
  let api = 0;
  for (const n of gh.counters.api.values()) api += n;
  return {
    api,
    browser: gh.counters.browser,
    cdn: gh.counters.cdnRequests,
    cdnBytes: gh.counters.cdnBytes,
    downloads: gh.counters.downloads,
    seen: gh.seen.length,
  };
}

function phase(gh, before) {
  const after = fakeTotals(gh);
  const d = {};
  for (const k of Object.keys(after)) d[k] = after[k] - before[k];
  d.requests = d.api + d.browser + d.cdn;
  d.seenRequests = gh.seen.slice(before.seen);
  return d;
}

const MiB = (n) => `${(n / 1024 / 1024).toFixed(2)} MiB`;
const KiB = (n) => `${(n / 1024).toFixed(1)} KiB`;
const verdict = (ok) => (ok ? "PASS" : "FAIL");

function printTable(rows) {
  const w = [0, 0, 0];
  for (const r of rows) for (let i = 0; i < 3; i++) w[i] = Math.max(w[i], String(r[i]).length);
  for (const r of rows) {
    const line = r.slice(0, 3).map((c, i) => String(c).padEnd(w[i]));
    console.log(`${line.join("  ")}  ${r[3] ?? ""}`.trimEnd());
  }
}

async function main() {
  const opts = parseArgs({
    assets: { kind: "int", default: 200, min: 2, help: "the remote's .rpm assets" },
    releases: { kind: "int", default: 120, min: 1, help: "releases the assets are dealt over" },
    rate: {
      kind: "number",
      default: 50,
      validate: (r) => (r > 0 ? undefined : "a number greater than 0"),
      arg: "R",
      help: "GitHub requests per second, the token bucket's rate (above 0, fractions allowed)",
    },
    burst: { kind: "int", default: 5, min: 1, arg: "B", help: "the token bucket's burst" },
    keep: { kind: "boolean", help: "keep the temp folder (printed at the end)" },
  });
  requirePrerequisites();
  const work = mkdtempSync(join(tmpdir(), "reposync-bench-sync-"));
  const { FakeGitHub } = await loadFakeGitHub(work);
  const { openDatabase } = await dist("store/open-database.js");
  const { migrate } = await dist("store/migrate.js");
  const { addRemote } = await dist("store/remotes.js");
  const { createSyncDeps } = await dist("sync/sync-deps.js");
  const { runSync } = await dist("sync/sync-job.js");

  const assets = planAssets(opts, bigRpm());
  const gh = await FakeGitHub.start();
  const db = await openDatabase(join(work, "reposync.db"));
  try {
    // Build the repo: release r holds the assets dealt to it; assets map back to their plan.
    gh.addRepo({ owner: "bench", repo: "rpms" });
    const byId = new Map();
    for (let r = 0; r < opts.releases; r++) {
      const mine = assets.filter((a) => a.release === r);
      const { assetIds } = gh.addRelease("bench", "rpms", {
        tag: `v${r + 1}`,
        assets: mine.map((a) => ({ name: a.name, content: a.content })),
      });
      for (const [i, id] of assetIds.entries()) byId.set(id, mine[i]);
    }
    await migrate(db);
    await addRemote(db, {
      name: "bench",
      repo: "bench/rpms",
      apiUrl: null,
      tokenEnv: null,
      include: [],
      exclude: [],
      prereleases: false,
      intervalMs: 300_000,
      packageMode: "cache",
    });
    const { deps } = createSyncDeps({
      db,
      settings: {
        githubApiUrl: gh.apiUrl,
        githubSyncRate: opts.rate,
        githubSyncBurst: opts.burst,
      },
      tokenFor: () => gh.token,
    });
    // The client's own count of requests, each taken through the bucket: it must equal what the
    // fake saw, or some request skipped the bucket and the lower bound would not hold.
    const client = deps.client(gh.apiUrl, gh.token);
    const sumHeaders = assets.reduce((s, a) => s + a.headerEnd, 0);
    const expectedPages = Math.ceil(opts.releases / 100);
    console.log(
      `bench: node ${process.version}, ${assets.length} assets (${MiB(assets.reduce((s, a) => s + a.content.length, 0))}) in ${opts.releases} releases, rate ${opts.rate}/s, burst ${opts.burst}, SQLite`,
    );

    // The prime. The bucket is full (burst tokens saved up) when it starts.
    let before = fakeTotals(gh);
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const prime = await runSync(deps, "bench", { prime: true });
    const primeSeconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const p = phase(gh, before);
    const primeClient = { ...client.counters };
    if (prime.status !== "ok")
      console.log(`bench: the prime ended ${prime.status}: ${prime.error}`);

    // Ranged CDN requests per asset, and whether that is what its header size calls for.
    const ranged = new Map();
    for (const s of p.seenRequests) {
      const id = /^\/assets\/(\d+)$/.exec(s.path)?.[1];
      if (s.server !== "cdn" || id === undefined || s.range === undefined) continue;
      ranged.set(Number(id), (ranged.get(Number(id)) ?? 0) + 1);
    }
    const histogram = new Map();
    const offTarget = [];
    for (const [id, a] of byId) {
      const n = ranged.get(id) ?? 0;
      histogram.set(n, (histogram.get(n) ?? 0) + 1);
      const want = a.headerEnd <= FIRST_READ ? 1 : 2;
      if (n !== want) offTarget.push(`${a.name}: ${n} (header ${a.headerEnd} B, want ${want})`);
    }
    const bigHeaders = [...byId.values()].filter((a) => a.headerEnd > FIRST_READ);
    const histText = [...histogram.entries()]
      .sort(([a], [b]) => a - b)
      .map(([n, count]) => `${count} took ${n}`)
      .join(", ");
    const overshoot = p.cdnBytes - sumHeaders;
    const overshootLimit = FIRST_READ * assets.length;

    // Unchanged re-sync: the same listing, so every page should answer 304.
    before = fakeTotals(gh);
    const t1 = performance.now();
    const again = await runSync(deps, "bench", { prime: true });
    const againSeconds = (performance.now() - t1) / 1000;
    const u = phase(gh, before);
    const notModified = u.seenRequests.filter((s) => s.server === "api" && s.status === 304);
    const us = again.summary ?? {};
    const unchangedOk =
      again.status === "ok" &&
      u.api === expectedPages &&
      notModified.length === u.api &&
      u.browser === 0 &&
      u.cdn === 0 &&
      us.read === 0 &&
      us.snapshot === null;

    // Download counts moved: every page answers 200 with new ETags, yet no stable field changed.
    gh.bumpDownloadCounts();
    before = fakeTotals(gh);
    const bumped = await runSync(deps, "bench", { prime: true });
    const b = phase(gh, before);
    const bs = bumped.summary ?? {};
    const bumpedOk =
      bumped.status === "ok" && b.cdn === 0 && b.browser === 0 && bs.read === 0 && !bs.snapshot;

    const requests = p.requests;
    const bound = Math.max(0, requests - opts.burst) / opts.rate;
    const ratio = primeSeconds / bound;
    const ps = prime.summary ?? {};
    const rangedOk = offTarget.length === 0 && p.downloads === 0;

    console.log("");
    printTable([
      ["measure", "value", "target", "result"],
      [
        "prime: status",
        `${prime.status}, ${ps.packages ?? "?"} packages, ${ps.failed ?? "?"} failed`,
        "",
        "",
      ],
      [
        "prime: API requests",
        `${p.api} (${ps.pages ?? "?"} listing pages)`,
        `${expectedPages} pages`,
        "",
      ],
      ["prime: download-URL hops (302)", p.browser, "", ""],
      ["prime: CDN requests", `${p.cdn} (${p.downloads} whole-file)`, "", ""],
      [
        "prime: GitHub requests in all",
        `${requests} (through the bucket: ${primeClient.api + primeClient.other})`,
        "equal",
        verdict(primeClient.api + primeClient.other === requests),
      ],
      [
        "prime: ranged requests per asset",
        histText,
        `${assets.length - bigHeaders.length} x 1, ${bigHeaders.length} x 2`,
        verdict(rangedOk),
      ],
      [
        "prime: CDN bytes",
        `${MiB(p.cdnBytes)} vs headers ${MiB(sumHeaders)} (+${KiB(overshoot)})`,
        `+<= ${KiB(overshootLimit)}`,
        verdict(overshoot >= 0 && overshoot <= overshootLimit),
      ],
      [
        "prime: wall time",
        `${primeSeconds.toFixed(2)} s (cpu ${((cpu.user + cpu.system) / 1e6).toFixed(2)} s)`,
        "",
        "",
      ],
      [
        "prime: lower bound",
        `${bound.toFixed(2)} s = (${requests} - ${opts.burst} burst) / ${opts.rate}/s; ratio ${ratio.toFixed(3)}`,
        `<= ${TIME_TARGET}`,
        verdict(ratio <= TIME_TARGET),
      ],
      [
        "unchanged re-sync",
        `${u.api} API (${notModified.length} x 304), ${u.browser + u.cdn} asset requests, read ${us.read ?? "?"}, snapshot ${us.snapshot === null ? "none" : (us.snapshot ?? "?")}, ${againSeconds.toFixed(2)} s`,
        `${expectedPages} x 304, 0 read`,
        verdict(unchangedOk),
      ],
      [
        "re-sync after download counts moved",
        `${b.api} API (${b.seenRequests.filter((s) => s.status === 200).length} x 200), ${b.browser + b.cdn} asset requests, read ${bs.read ?? "?"}, snapshot ${bs.snapshot ?? "none"}`,
        "0 read",
        verdict(bumpedOk),
      ],
    ]);
    for (const line of offTarget.slice(0, 10)) console.log(`  off target: ${line}`);
    if (bigHeaders.length > 0) {
      console.log(
        `  headers over 64 KiB: ${bigHeaders.map((a) => `${a.source} ${a.headerEnd} B`).join(", ")}`,
      );
    }
    if (opts.keep) console.log(`bench: kept ${work}`);
  } finally {
    await db.close();
    await gh.close();
    if (!opts.keep) rmSync(work, { recursive: true, force: true });
  }
}

await main();
