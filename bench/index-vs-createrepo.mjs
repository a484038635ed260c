#!/usr/bin/env node
// Benchmark: `reposync index DIR` against `createrepo_c --no-database DIR` on the same folder of
// 10,000 small RPMs, both run as a user would run them (the built CLI as a child process, nothing
// imported from src/). Each tool runs RUNS times, alternating so neither gets a warmer page cache;
// the medians are compared. Peak RSS comes from GNU time's %M (the kernel's maximum resident set
// of the process, in KiB), the same measurement for both tools.
//
// Targets: reposync's median <= 1.5 x createrepo_c's, reposync's peak RSS < 300 MB. It prints
// PASS or FAIL for each but exits 0: a benchmark reports, CI does not gate on speed.
//
//   npm run build && npm run bench:index [-- --count 10000 --runs 3 --keep]  (--help: the flags)

import { execFileSync, spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import { parseArgs } from "./args.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const CLI = join(ROOT, "bin", "reposync");
const FIXTURES = join(ROOT, "fixtures", "rpms");
const GNU_TIME = "/usr/bin/time";
const RATIO_TARGET = 1.5;
const RSS_TARGET_MB = 300;

function hasCommand(name) {
  return spawnSync("sh", ["-c", `command -v ${name}`], { stdio: "ignore" }).status === 0;
}

function requirePrerequisites() {
  const problems = [];
  if (!existsSync(join(ROOT, "dist", "cli", "main.js"))) {
    problems.push("dist/ is missing: run `npm run build` first");
  }
  if (!hasCommand("createrepo_c"))
    problems.push("createrepo_c is missing (apt-get install createrepo-c)");
  if (!existsSync(GNU_TIME)) problems.push(`${GNU_TIME} is missing (apt-get install time)`);
  if (problems.length > 0) {
    for (const p of problems) console.error(`bench: ${p}`);
    process.exit(1);
  }
}

/**
 * The small fixtures, round-robin: several header shapes (many deps, many files, long changelog,
 * UTF-8 text, noarch, source), none of them the 600 KiB-header one, which is not "small".
 */
function sourcePackages() {
  const names = readdirSync(FIXTURES)
    .filter((n) => n.endsWith(".rpm") && !n.startsWith("fx-bighdr-"))
    .sort();
  if (names.length === 0) throw new Error(`no fixture RPMs in ${FIXTURES}`);
  return names.map((n) => join(FIXTURES, n));
}

function makeRepo(dir, count) {
  mkdirSync(dir, { recursive: true });
  const sources = sourcePackages();
  const width = String(count).length;
  for (let i = 0; i < count; i++) {
    const src = sources[i % sources.length];
    // A distinct prefix keeps each name unique and still a plain `*.rpm` file name.
    copyFileSync(src, join(dir, `c${String(i).padStart(width, "0")}-${basename(src)}`));
  }
}

/**
 * Runs a command under GNU time; returns wall seconds (measured here), CPU seconds (user + system,
 * less sensitive than wall time to other load on a shared machine) and peak RSS in KiB.
 */
function timed(cmd, args, workDir) {
  const rssFile = join(workDir, "time.out");
  const start = process.hrtime.bigint();
  const res = spawnSync(GNU_TIME, ["-f", "%M %U %S", "-o", rssFile, cmd, ...args], {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (res.status !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} exited ${res.status}:\n${res.stderr}${res.stdout}`);
  }
  const lines = readFileSync(rssFile, "utf8").trim().split("\n");
  const [rss, user, sys] = (lines[lines.length - 1] ?? "").split(" ");
  return {
    seconds,
    cpuSeconds: Number.parseFloat(user ?? "") + Number.parseFloat(sys ?? ""),
    rssKiB: Number.parseInt(rss ?? "", 10),
  };
}

/** The package count primary.xml claims, so a run that indexed nothing cannot look fast. */
function primaryPackageCount(dir) {
  const repomd = readFileSync(join(dir, "repodata", "repomd.xml"), "utf8");
  const href = /<data type="primary">[\s\S]*?<location href="([^"]+)"/.exec(repomd)?.[1];
  if (href === undefined) throw new Error(`no primary in ${dir}/repodata/repomd.xml`);
  const head = gunzipSync(readFileSync(join(dir, href)))
    .subarray(0, 4096)
    .toString("utf8");
  const n = /<metadata [^>]*packages="(\d+)"/.exec(head)?.[1];
  return n === undefined ? -1 : Number.parseInt(n, 10);
}

function clearRepodata(dir) {
  rmSync(join(dir, "repodata"), { recursive: true, force: true });
  rmSync(join(dir, ".repodata"), { recursive: true, force: true });
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

function main() {
  const opts = parseArgs({
    count: { kind: "int", default: 10_000, min: 1, help: "how many RPMs the folder holds" },
    runs: { kind: "int", default: 3, min: 1, help: "runs of each tool, alternating" },
    keep: { kind: "boolean", help: "keep the temp folder (printed at the end)" },
  });
  requirePrerequisites();
  const work = mkdtempSync(join(tmpdir(), "reposync-bench-"));
  const repo = join(work, "repo");
  try {
    process.stdout.write(`bench: copying ${opts.count} fixture RPMs into ${repo} ... `);
    makeRepo(repo, opts.count);
    console.log("done");
    const versions = execFileSync("createrepo_c", ["--version"], { encoding: "utf8" }).trim();
    console.log(
      `bench: node ${process.version}, ${versions.split("\n")[0]}, ${opts.runs} runs each`,
    );

    const tools = {
      reposync: [process.execPath, [CLI, "index", repo]],
      createrepo_c: ["createrepo_c", ["--no-database", "--quiet", repo]],
    };
    const results = { reposync: [], createrepo_c: [] };
    for (let run = 1; run <= opts.runs; run++) {
      // Alternate which goes first so neither always inherits the other's warm caches.
      const order = run % 2 === 1 ? ["reposync", "createrepo_c"] : ["createrepo_c", "reposync"];
      for (const name of order) {
        clearRepodata(repo);
        const [cmd, args] = tools[name];
        const r = timed(cmd, args, work);
        const packages = primaryPackageCount(repo);
        if (packages !== opts.count) {
          throw new Error(
            `${name} wrote ${packages} packages into primary.xml, expected ${opts.count}`,
          );
        }
        results[name].push(r);
        console.log(
          `run ${run} ${name.padEnd(12)} ${r.seconds.toFixed(2).padStart(7)} s  cpu ${r.cpuSeconds.toFixed(2).padStart(7)} s  peak RSS ${((r.rssKiB * 1024) / 1e6).toFixed(0).padStart(5)} MB`,
        );
      }
    }

    const ours = median(results.reposync.map((r) => r.seconds));
    const theirs = median(results.createrepo_c.map((r) => r.seconds));
    const ratio = ours / theirs;
    const oursCpu = median(results.reposync.map((r) => r.cpuSeconds));
    const theirsCpu = median(results.createrepo_c.map((r) => r.cpuSeconds));
    const oursRssMB = (Math.max(...results.reposync.map((r) => r.rssKiB)) * 1024) / 1e6;
    const theirsRssMB = (Math.max(...results.createrepo_c.map((r) => r.rssKiB)) * 1024) / 1e6;
    console.log("");
    console.log(`packages            ${opts.count}`);
    console.log(
      `reposync index      median ${ours.toFixed(2)} s (cpu ${oursCpu.toFixed(2)} s), peak RSS ${oursRssMB.toFixed(0)} MB`,
    );
    console.log(
      `createrepo_c        median ${theirs.toFixed(2)} s (cpu ${theirsCpu.toFixed(2)} s), peak RSS ${theirsRssMB.toFixed(0)} MB`,
    );
    console.log(
      `ratio               ${ratio.toFixed(2)} (target <= ${RATIO_TARGET}): ${ratio <= RATIO_TARGET ? "PASS" : "FAIL"}`,
    );
    console.log(
      `reposync peak RSS   ${oursRssMB.toFixed(0)} MB (target < ${RSS_TARGET_MB} MB): ${oursRssMB < RSS_TARGET_MB ? "PASS" : "FAIL"}`,
    );
  } finally {
    if (opts.keep) console.log(`bench: kept ${work}`);
    else rmSync(work, { recursive: true, force: true });
  }
}

main();
