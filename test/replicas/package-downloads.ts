import { setTimeout as delay } from "node:timers/promises";
import type { ServeProcess } from "../server/cli-process.js";
import {
  cli,
  getBytes,
  metricSum,
  metricValue,
  query,
  ReplicaCluster,
  rpmAssets,
  servedPackages,
  sha256,
} from "./replicas-harness.js";

/** The shape of the seed's run: replicas, packages, one client per replica, requests in flight. */
export interface DownloadRunOptions {
  readonly leases: boolean;
  readonly replicas?: number;
  readonly packages?: number;
  readonly concurrency?: number;
  readonly packageBytes?: number;
  /**
   * Holds every package download at the fake GitHub until each replica has looked up (hit or
   * miss, its /metrics) every request sent to it so far, then releases them together. So the
   * replicas that ask for a package at the same time all miss it before its first download
   * completes, however the machine schedules them: the counts do not depend on timing. A bench
   * may turn it off to see free-running numbers.
   */
  readonly lockstep?: boolean;
}

/** What one run counted: the seed's table, and what the replicas said about it. */
export interface DownloadRunCounts {
  readonly requests: number;
  readonly succeeded: number;
  /** Whole-file downloads of the packages the fake GitHub answered. */
  readonly upstreamFetches: number;
  /** reposync_fetch_lease_waits_total over all replicas, and by kind. */
  readonly leaseWaits: number;
  readonly leaseWaitsByKind: Readonly<Record<string, number>>;
  /** reposync_package_cache_events_total{event="upstream_fetch"} per replica. */
  readonly upstreamFetchesPerReplica: readonly number[];
  /** fetch_leases rows after the run. */
  readonly leaseRowsAfter: number;
  /** How often the lockstep released held downloads. */
  readonly releases: number;
}

const WAIT_KINDS = ["served", "failed", "expired", "released", "error", "aborted"];

async function scrape(replica: ServeProcess): Promise<string> {
  const res = await fetch(`${replica.url}/metrics`);
  return res.text();
}

/** Package lookups (hits and misses) a replica's cache has made so far. */
async function lookups(replica: ServeProcess): Promise<number> {
  const text = await scrape(replica);
  const event = (e: string) =>
    metricValue(text, "reposync_package_cache_events_total", `event="${e}"`);
  return event("hit") + event("miss");
}

/**
 * The seed's measurement through real processes: `replicas` `reposync serve` processes on one
 * Postgres schema and one package folder, one remote of `packages` RPM assets on the fake GitHub,
 * and one client per replica fetching every package `concurrency` at a time, checking each
 * body's sha256 against primary.xml. Everything runs on 127.0.0.1; the schema, the folder, the
 * fake and the processes are its own and are removed at the end.
 */
export async function runDownloads(options: DownloadRunOptions): Promise<DownloadRunCounts> {
  const replicaCount = options.replicas ?? 3;
  const packageCount = options.packages ?? 30;
  const concurrency = options.concurrency ?? 6;
  const lockstep = options.lockstep ?? true;

  const cluster = await ReplicaCluster.start("reposync-replicas-");
  const { gh, schema } = cluster;
  let stopLockstep = () => {};
  try {
    const assets = rpmAssets("rs", packageCount, options.packageBytes);
    gh.addRepo({ owner: "acme", repo: "pkgs" });
    const { assetIds } = gh.addRelease("acme", "pkgs", { tag: "v1", assets });
    const env = cluster.env({ REPOSYNC_FETCH_LEASES: options.leases ? "on" : "off" });
    await cli(["add-remote", "pkgs", "acme/pkgs"], env);
    const replicas = await cluster.startReplicas(replicaCount, env);

    // The first sync, then the package list every client works through.
    const packages = await servedPackages(replicas[0]!.url, "pkgs");
    if (packages.length !== packageCount) {
      throw new Error(`primary.xml lists ${packages.length} packages, not ${packageCount}`);
    }
    const packageIds = new Set(assetIds);
    const isDownload = (s: { server: string; path: string; status: number }) =>
      s.server === "cdn" &&
      s.status === 200 &&
      packageIds.has(Number(/^\/assets\/(\d+)$/.exec(s.path)?.[1]));

    const sent = replicas.map(() => 0);
    let releases = 0;
    if (lockstep) {
      const base = await Promise.all(replicas.map(lookups));
      gh.holdCdn = (r) => r.range === undefined && packageIds.has(r.assetId);
      let running = true;
      stopLockstep = () => {
        running = false;
        gh.holdCdn = undefined;
        gh.releaseHeldCdn();
      };
      void (async () => {
        while (running) {
          if (gh.heldCdn.length > 0) {
            // Read the counts first, then look at what was sent: a request sent meanwhile
            // only makes the check fail this round, never pass too early.
            const done = await Promise.all(replicas.map(lookups));
            if (done.every((n, i) => n - (base[i] ?? 0) === sent[i])) {
              if (gh.releaseHeldCdn() > 0) releases++;
            }
          }
          await delay(5);
        }
      })();
    }

    let succeeded = 0;
    const client = async (replica: ServeProcess, index: number) => {
      let next = 0;
      const worker = async () => {
        for (let i = next++; i < packages.length; i = next++) {
          const pkg = packages[i]!;
          sent[index] = (sent[index] ?? 0) + 1;
          const res = await getBytes(`${replica.url}/pkgs/${pkg.href}`);
          if (res.status === 200 && sha256(res.body) === pkg.sha256) succeeded++;
        }
      };
      await Promise.all(Array.from({ length: concurrency }, worker));
    };
    await Promise.all(replicas.map(client));
    stopLockstep();

    const texts = await Promise.all(replicas.map(scrape));
    const leaseWaitsByKind: Record<string, number> = {};
    for (const kind of WAIT_KINDS) {
      const n = texts.reduce(
        (sum, t) => sum + metricValue(t, "reposync_fetch_lease_waits_total", `kind="${kind}"`),
        0,
      );
      if (n > 0) leaseWaitsByKind[kind] = n;
    }
    const rows = await query<{ n: string }>(schema, "select count(*) as n from fetch_leases");
    return {
      requests: replicaCount * packageCount,
      succeeded,
      upstreamFetches: gh.seen.filter(isDownload).length,
      leaseWaits: texts.reduce((n, t) => n + metricSum(t, "reposync_fetch_lease_waits_total"), 0),
      leaseWaitsByKind,
      upstreamFetchesPerReplica: texts.map((t) =>
        metricValue(t, "reposync_package_cache_events_total", 'event="upstream_fetch"'),
      ),
      leaseRowsAfter: Number(rows[0]?.n),
      releases,
    };
  } finally {
    stopLockstep();
    await cluster.stop();
  }
}
