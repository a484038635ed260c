import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { RateLimitBudget } from "../github/token-bucket.js";
import type { PackageCacheMetrics } from "../packages/package-cache.js";
import type { SyncReport } from "../sync/sync-job.js";

/** What GitHub traffic the process has made so far, read when /metrics is scraped. */
export interface GitHubStats {
  /** Requests to API base URLs (they spend a token's budget) and elsewhere (downloads, CDN). */
  readonly apiRequests: number;
  readonly otherRequests: number;
  /** Response body bytes read by asset reads: RPM headers, and digest-less whole files. */
  readonly bodyBytes: number;
  readonly budgets: readonly RateLimitBudget[];
}

/**
 * The Prometheus metrics of one server process, in a registry of its own (not prom-client's
 * global one, so that several servers in one test process do not collide). Counters that other
 * parts already keep (GitHub request counts, the bucket's budgets) are read at scrape time
 * through `githubStats` instead of being counted twice.
 */
export class ServerMetrics {
  readonly registry = new Registry();
  private readonly syncs: Counter<"status">;
  private readonly derivations: Counter<"result">;
  private readonly coldWaits: Counter<"outcome">;
  private readonly cache: Counter<"event">;
  private readonly leaseWaits: Counter<"kind">;
  private readonly requestDuration: Histogram<"route" | "method" | "status">;
  private readonly requestChildren = new Map<string, { observe(value: number): void }>();

  constructor(githubStats?: () => GitHubStats) {
    const registers = [this.registry];
    this.syncs = new Counter({
      name: "reposync_syncs_total",
      help: "Sync jobs of remotes, by how they ended (ok, error, skipped)",
      labelNames: ["status"],
      registers,
    });
    this.derivations = new Counter({
      name: "reposync_derivations_total",
      help: "Release assets read into packages by syncs, by result (ok, failed)",
      labelNames: ["result"],
      registers,
    });
    this.coldWaits = new Counter({
      name: "reposync_cold_waits_total",
      help: "Requests that waited for the first snapshot of a remote, by outcome (served, timeout)",
      labelNames: ["outcome"],
      registers,
    });
    this.cache = new Counter({
      name: "reposync_package_cache_events_total",
      help: "Package cache events: hit, miss, upstream_fetch, coalesced_wait, fetch_error",
      labelNames: ["event"],
      registers,
    });
    this.leaseWaits = new Counter({
      name: "reposync_fetch_lease_waits_total",
      help: "Waits on another replica's package download (Postgres fetch leases), by how they ended",
      labelNames: ["kind"],
      registers,
    });
    this.requestDuration = new Histogram({
      name: "reposync_http_request_duration_seconds",
      help: "HTTP request durations by route, method and status",
      labelNames: ["route", "method", "status"],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60],
      registers,
    });
    for (const event of ["hit", "miss", "upstream_fetch", "coalesced_wait", "fetch_error"]) {
      this.cache.inc({ event }, 0);
    }
    if (githubStats) {
      new Gauge({
        name: "reposync_github_requests_total",
        help: "HTTP requests sent to GitHub, by target (api: spends budget; other: downloads, CDN)",
        labelNames: ["target"],
        registers,
        collect() {
          const s = githubStats();
          this.set({ target: "api" }, s.apiRequests);
          this.set({ target: "other" }, s.otherRequests);
        },
      });
      new Gauge({
        name: "reposync_github_body_bytes_total",
        help: "Response body bytes read from GitHub by asset reads (RPM headers)",
        registers,
        collect() {
          this.set(githubStats().bodyBytes);
        },
      });
      new Gauge({
        name: "reposync_github_rate_limit_remaining",
        help: "Requests left in GitHub's rate-limit window, per credential (no secret in the label)",
        labelNames: ["key"],
        registers,
        collect() {
          this.reset();
          for (const b of githubStats().budgets) this.set({ key: b.key }, b.remaining);
        },
      });
    }
  }

  /** Callbacks for the package cache. */
  readonly packageCache: PackageCacheMetrics = {
    hit: () => this.cache.inc({ event: "hit" }),
    miss: () => this.cache.inc({ event: "miss" }),
    upstreamFetch: () => this.cache.inc({ event: "upstream_fetch" }),
    coalescedWait: () => this.cache.inc({ event: "coalesced_wait" }),
    fetchError: () => this.cache.inc({ event: "fetch_error" }),
  };

  /** Counts one finished sync job and the assets it read. */
  syncReport(report: SyncReport): void {
    this.syncs.inc({ status: report.status });
    if (report.status !== "skipped" && report.summary) {
      const { read, failed } = report.summary;
      this.derivations.inc({ result: "ok" }, Math.max(0, read - failed));
      this.derivations.inc({ result: "failed" }, failed);
    }
  }

  /** Counts one wait on another replica's fetch lease, by how it ended. */
  fetchLeaseWait(kind: string): void {
    this.leaseWaits.inc({ kind });
  }

  /** Counts one cold wait. */
  coldWait(outcome: "served" | "timeout" | "failed"): void {
    this.coldWaits.inc({ outcome });
  }

  /** Records one answered request; `route` is the route pattern, never the raw URL. */
  request(route: string, method: string, status: number, seconds: number): void {
    // prom-client hashes a label object on every observe; the children are few (routes x
    // methods x statuses), so each is looked up once and kept.
    const key = `${route} ${method} ${status}`;
    let child = this.requestChildren.get(key);
    if (!child) {
      child = this.requestDuration.labels({ route, method, status: String(status) });
      this.requestChildren.set(key, child);
    }
    child.observe(seconds);
  }
}
