import type { Logger } from "pino";
import { need } from "./config/need.js";
import { remoteTokenResolver } from "./config/remote-token.js";
import type { Config } from "./config/schema.js";
import type { GitHubClient } from "./github/client.js";
import { type Clock, systemClock } from "./github/clock.js";
import { ContentStore } from "./packages/content-store.js";
import { fetchLeasesFor } from "./packages/fetch-lease.js";
import { PackageCache } from "./packages/package-cache.js";
import { createGitHubUpstream } from "./packages/upstream.js";
import { ServerMetrics } from "./server/metrics.js";
import {
  githubPackageSource,
  type PackageSource,
  type RemotePackage,
} from "./server/package-source.js";
import { migrate } from "./store/migrate.js";
import { openDatabase } from "./store/open-database.js";
import type { Database } from "./store/port.js";
import type { Remote } from "./store/remote-input.js";
import { createSyncer } from "./sync/create-syncer.js";
import { createSyncDeps } from "./sync/sync-deps.js";

/** How long stop() lets package downloads finish (the rest of serve's 10 s budget is margin). */
const CACHE_GRACE_MS = 3000;

export interface EngineOptions {
  readonly config: Config;
  readonly logger: Logger;
  readonly clock?: Clock;
  /** The token of a remote; default: its --token-env variable, else GITHUB_TOKEN. */
  readonly tokenFor?: (remote: Remote) => string | undefined;
  /** How often the syncer looks for new remotes and requests (1 s). */
  readonly requestPollMs?: number;
  /** Overrides CACHE_GRACE_MS (tests). */
  readonly cacheGraceMs?: number;
}

/** Hears of every sync that ends in this process, with its error when it failed. */
export type SyncedListener = (remote: string, failure?: string) => void;

/**
 * Everything of `reposync serve` but HTTP: the database (migrated), the global token bucket and
 * the GitHub clients, the package cache (with fetch leases on Postgres) and the syncer. One per
 * serving process; with `--workers`, the cluster's primary holds the only one, and the workers
 * reach it through IPC (src/cluster/), so there is still one bucket and one cache per machine.
 */
export interface Engine {
  readonly db: Database;
  readonly metrics: ServerMetrics;
  /** Cache-mode downloads (coalesced) and redirect-mode addresses. */
  readonly packages: PackageSource;
  /** Asks the syncer for a prime of a cold remote (nothing when one of it is running). */
  enqueuePrime(remote: string): void;
  /** Subscribes to the end of every sync of this process. */
  onSynced(listener: SyncedListener): void;
  /**
   * Stops the syncer (its jobs commit what they read and release their leases), gives package
   * downloads their grace, then closes the database. Call it once nothing uses the engine.
   */
  stop(): Promise<void>;
}

/**
 * Starts the engine in order: config -> database -> migrations -> token bucket and GitHub
 * clients -> package cache (and, on Postgres, its fetch leases) -> syncer.
 */
export async function startEngine(options: EngineOptions): Promise<Engine> {
  const { config, logger: log } = options;
  const clock = options.clock ?? systemClock;
  const db = await openDatabase(config.database);
  try {
    const migrated = await migrate(db);
    if (migrated.applied.length > 0) log.info({ applied: migrated.applied }, "migrated");

    const tokenFor = options.tokenFor ?? remoteTokenResolver(config.githubToken);
    const built = createSyncDeps({
      db,
      settings: {
        githubApiUrl: need(config.githubApiUrl, "githubApiUrl"),
        githubSyncRate: need(config.githubSyncRate, "githubSyncRate"),
        githubSyncBurst: need(config.githubSyncBurst, "githubSyncBurst"),
      },
      tokenFor,
      clock,
      logger: log,
    });
    // Every client handed out, to sum their request counters for /metrics.
    const clients = new Set<GitHubClient>();
    const syncLeaseMs = need(config.syncLease, "syncLease");
    const syncDeps = {
      ...built.deps,
      // Renewed at a quarter of its length, as with the default 2m/30s: three renewals in a
      // row must fail before another replica may take the scan over.
      leaseMs: syncLeaseMs,
      renewMs: Math.floor(syncLeaseMs / 4),
      client: (baseUrl: string, token: string | undefined) => {
        const c = built.deps.client(baseUrl, token);
        clients.add(c);
        return c;
      },
    };
    const clientFor = (remote: Remote) =>
      syncDeps.client(remote.apiUrl ?? need(config.githubApiUrl, "githubApiUrl"), tokenFor(remote));

    const metrics = new ServerMetrics(() => {
      let apiRequests = 0;
      let otherRequests = 0;
      let bodyBytes = 0;
      for (const c of clients) {
        apiRequests += c.counters.api;
        otherRequests += c.counters.other;
        bodyBytes += c.counters.bytes;
      }
      return { apiRequests, otherRequests, bodyBytes, budgets: built.bucket.budgets() };
    });

    // Replicas sharing Postgres take a fetch lease per miss; on SQLite there is none.
    // REPOSYNC_FETCH_LEASES=off exists only to show (tests, diagnosis) what they prevent.
    const leases = need(config.fetchLeases, "fetchLeases")
      ? fetchLeasesFor({
          db,
          owner: syncDeps.owner,
          clock,
          logger: log,
          onWait: (kind) => metrics.fetchLeaseWait(kind),
        })
      : undefined;
    const cache = new PackageCache<RemotePackage>({
      ...(leases ? { acquire: leases.acquire } : {}),
      store: ContentStore.inDataDir(need(config.dataDir, "dataDir")),
      fetchUpstream: createGitHubUpstream<RemotePackage>({
        clientFor: (pkg) => clientFor(pkg.remote),
      }),
      stopGraceMs: options.cacheGraceMs ?? CACHE_GRACE_MS,
      metrics: metrics.packageCache,
      clock,
    });
    await cache.start();
    leases?.start();

    const syncedListeners: SyncedListener[] = [];
    const syncer = createSyncer(syncDeps, {
      workers: need(config.githubSyncWorkers, "githubSyncWorkers"),
      pollIntervalMs: need(config.githubSyncPollInterval, "githubSyncPollInterval"),
      ...(options.requestPollMs !== undefined ? { requestPollMs: options.requestPollMs } : {}),
      onReport: (report) => {
        metrics.syncReport(report);
        log.info(report, "sync ended");
        const failure = "error" in report ? report.error : undefined;
        for (const listener of syncedListeners) listener(report.remote, failure);
      },
    });
    syncer.start();

    return {
      db,
      metrics,
      packages: githubPackageSource({ cache, clientFor }),
      // A prime while this remote's job runs would only queue a second full scan behind it;
      // the running one is what the waiters wait for.
      enqueuePrime: (remote) => {
        if (!syncer.queue.isRunning(remote)) syncer.enqueue(remote, { prime: true });
      },
      onSynced: (listener) => syncedListeners.push(listener),
      stop: async () => {
        await syncer.stop();
        await cache.stop();
        await leases?.stop();
        await db.close();
      },
    };
  } catch (err) {
    await db.close().catch(() => {});
    throw err;
  }
}
