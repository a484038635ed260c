#!/usr/bin/env node
// Benchmark of fetch leases across replicas, the seed's measurement for reposync: three
// `reposync serve` processes (the compiled CLI) on one Postgres database (a schema of its own)
// and one package folder, the fake GitHub serving 30 RPM assets, and three clients, each through
// a different replica, fetching all 30 packages six requests at a time. It runs the scenario
// with REPOSYNC_FETCH_LEASES=off and =on, `--runs` times each, and prints the seed's table:
// upstream fetches (whole-file downloads the fake GitHub answered), waits on another instance
// (reposync_fetch_lease_waits_total over the replicas), requests succeeded (200 and the sha256 of
// primary.xml), and lease rows left afterwards. A benchmark reports; the exit code is 0 unless
// the scenario itself could not run.
//
//   npm run bench:replicas [-- --runs 3 --packages 30 --concurrency 6 --bytes 262144 --lockstep]
//   (--help lists the flags)
//
// By default the clients run free, as the seed's did: how many misses overlap then depends on
// timing, so the figures without leases vary from run to run. --lockstep holds every download at
// the fake until each replica has looked up every request sent to it (what the test in
// test/replicas/fetch-leases.test.ts does), which makes the misses overlap on every machine.
//
// The scenario is test/replicas/package-downloads.ts itself, imported through a transpiling
// loader hook (bench/replicas-ts-loader.mjs), so bench and test cannot drift apart. Postgres:
// 127.0.0.1:5432 (trust), or REPOSYNC_TEST_POSTGRES.

import { register } from "node:module";
import { parseArgs } from "./args.mjs";

const opts = parseArgs({
  runs: { kind: "int", default: 3, min: 1, help: "runs of the scenario with leases off and on" },
  packages: { kind: "int", default: 30, min: 1, help: "RPM assets the fake GitHub serves" },
  concurrency: { kind: "int", default: 6, min: 1, help: "requests each client keeps in flight" },
  bytes: { kind: "int", default: 256 * 1024, min: 1, help: "size of each package in bytes" },
  lockstep: {
    kind: "boolean",
    help: "hold each download until every replica has looked up its requests",
  },
});
register(new URL("./replicas-ts-loader.mjs", import.meta.url));
const { runDownloads } = await import("../test/replicas/package-downloads.ts");
const { havePostgres } = await import("../test/support/postgres.ts");
if (!(await havePostgres())) {
  console.error("Postgres is not reachable (127.0.0.1:5432 or REPOSYNC_TEST_POSTGRES)");
  process.exit(1);
}

const results = { off: [], on: [] };
for (let run = 1; run <= opts.runs; run++) {
  for (const mode of ["off", "on"]) {
    const started = Date.now();
    const counts = await runDownloads({
      leases: mode === "on",
      packages: opts.packages,
      concurrency: opts.concurrency,
      packageBytes: opts.bytes,
      lockstep: opts.lockstep,
    });
    results[mode].push(counts);
    console.error(
      `run ${run}, leases ${mode}: ${counts.upstreamFetches} upstream fetches, ` +
        `${counts.leaseWaits} lease waits ${JSON.stringify(counts.leaseWaitsByKind)}, ` +
        `per replica ${counts.upstreamFetchesPerReplica.join("/")}, ` +
        `${counts.succeeded}/${counts.requests} succeeded, ${Date.now() - started} ms`,
    );
  }
}

const list = (mode, pick) => results[mode].map(pick).join(", ");
const rows = [
  ["", "REPOSYNC_FETCH_LEASES=off", "on (default)"],
  ["upstream fetches", list("off", (c) => c.upstreamFetches), list("on", (c) => c.upstreamFetches)],
  ["waits on another instance", "–", list("on", (c) => c.leaseWaits)],
  [
    "requests succeeded",
    list("off", (c) => `${c.succeeded}/${c.requests}`),
    list("on", (c) => `${c.succeeded}/${c.requests}`),
  ],
  ["lease rows left", list("off", (c) => c.leaseRowsAfter), list("on", (c) => c.leaseRowsAfter)],
];
const widths = rows[0].map((_, col) => Math.max(...rows.map((r) => r[col].length)));
console.log(
  `${opts.runs} run(s): 3 replicas, ${opts.packages} packages of ${opts.bytes} bytes, ` +
    `3 clients x ${opts.concurrency} in flight, ${opts.lockstep ? "lockstep" : "free-running"}`,
);
for (const r of rows) console.log(r.map((cell, col) => cell.padEnd(widths[col])).join("   "));
