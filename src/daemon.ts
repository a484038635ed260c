import type { FastifyInstance } from "fastify";
import { type Logger, pino } from "pino";
import { remoteTokenResolver } from "./config/remote-token.js";
import type { Config } from "./config/schema.js";
import { ReposyncError } from "./errors.js";
import type { GitHubClient } from "./github/client.js";
import { type Clock, systemClock } from "./github/clock.js";
import type { TokenBucket } from "./github/token-bucket.js";
import { ContentStore } from "./packages/content-store.js";
import { type FetchLeases, fetchLeasesFor } from "./packages/fetch-lease.js";
import { PackageCache } from "./packages/package-cache.js";
import { createGitHubUpstream } from "./packages/upstream.js";
import { buildServer } from "./server/build-server.js";
import { ServerMetrics } from "./server/metrics.js";
import { githubPackageSource, type RemotePackage } from "./server/package-source.js";
import { migrate } from "./store/migrate.js";
import { openDatabase } from "./store/open-database.js";
import type { Database } from "./store/port.js";
import type { Remote } from "./store/remote-input.js";
import { createSyncer } from "./sync/create-syncer.js";
import { createSyncDeps } from "./sync/sync-deps.js";
import type { Syncer } from "./sync/syncer.js";

/** How long stop() lets requests in flight finish before cutting their connections. */
const DRAIN_MS = 4000;
/** How long stop() lets package downloads finish (the rest of the 10 s budget is margin). */
const CACHE_GRACE_MS = 3000;

export interface DaemonOptions {
  readonly config: Config;
  readonly logger?: Logger;
  readonly clock?: Clock;
  /** The token of a remote; default: its --token-env variable, else GITHUB_TOKEN. */
  readonly tokenFor?: (remote: Remote) => string | undefined;
  /** How often the syncer looks for new remotes and requests (1 s). */
  readonly requestPollMs?: number;
  /** Overrides DRAIN_MS (tests of the cut). */
  readonly drainMs?: number;
  /** Overrides CACHE_GRACE_MS (tests). */
  readonly cacheGraceMs?: number;
}

/**
 * A setting that has a default. Config's type leaves every setting optional, but loadConfig
 * fills the defaulted ones, so a missing one here is a bug in how the config was made.
 */
function need<T>(value: T | undefined, key: string): T {
  if (value === undefined) {
    throw new ReposyncError("CONFIG_INVALID", `setting ${key} is missing from the configuration`);
  }
  return value;
}

/** The running parts, in start order. */
interface Parts {
  db: Database;
  bucket: TokenBucket;
  cache: PackageCache<RemotePackage>;
  leases: FetchLeases | undefined;
  syncer: Syncer;
  app: FastifyInstance;
  shutdown: AbortController;
  url: string;
}

/**
 * `reposync serve` as an object: config -> database -> migrations -> token bucket and GitHub
 * clients -> package cache (and, on Postgres, its fetch leases) -> syncer -> HTTP server, started in that order and stopped in the
 * reverse one. start() and stop() are idempotent; stop() during start() waits for it first.
 *
 * Stopping is bounded so that systemd's stop (TimeoutStopSec, 10 s here by design) never has
 * to kill us: the server stops accepting and gives requests in flight DRAIN_MS, then cuts what
 * is left (a 200 MB download to a slow client is not worth a SIGKILL); cold waits end at once.
 * Then the syncer's jobs are aborted through their signal (each commits what it read and
 * releases its lease), package downloads get CACHE_GRACE_MS, and the database is closed.
 */
export class Daemon {
  readonly logger: Logger;
  private parts: Parts | undefined;
  private starting: Promise<string> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(private readonly options: DaemonOptions) {
    this.logger =
      options.logger ?? pino({ name: "reposync", level: options.config.logLevel ?? "info" });
  }

  /** The base URL the server listens on, once started. */
  get url(): string | undefined {
    return this.parts?.url;
  }

  /** Starts everything; resolves to the URL the server listens on. */
  start(): Promise<string> {
    this.starting ??= this.startParts();
    return this.starting;
  }

  /** Stops everything, in reverse order; idempotent. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await this.starting?.catch(() => {});
      const parts = this.parts;
      if (!parts) return;
      await this.stopParts(parts);
    })();
    return this.stopping;
  }

  private async startParts(): Promise<string> {
    const { config } = this.options;
    const clock = this.options.clock ?? systemClock;
    const log = this.logger;
    const db = await openDatabase(config.database);
    try {
      const migrated = await migrate(db);
      if (migrated.applied.length > 0) log.info({ applied: migrated.applied }, "migrated");

      const tokenFor = this.options.tokenFor ?? remoteTokenResolver(config.githubToken);
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
        syncDeps.client(
          remote.apiUrl ?? need(config.githubApiUrl, "githubApiUrl"),
          tokenFor(remote),
        );

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
        stopGraceMs: this.options.cacheGraceMs ?? CACHE_GRACE_MS,
        metrics: metrics.packageCache,
        clock,
      });
      await cache.start();
      leases?.start();

      const syncedListeners: ((remote: string, failure?: string) => void)[] = [];
      const syncer = createSyncer(syncDeps, {
        workers: need(config.githubSyncWorkers, "githubSyncWorkers"),
        pollIntervalMs: need(config.githubSyncPollInterval, "githubSyncPollInterval"),
        ...(this.options.requestPollMs !== undefined
          ? { requestPollMs: this.options.requestPollMs }
          : {}),
        onReport: (report) => {
          metrics.syncReport(report);
          log.info(report, "sync ended");
          const failure = "error" in report ? report.error : undefined;
          for (const listener of syncedListeners) listener(report.remote, failure);
        },
      });

      const shutdown = new AbortController();
      const app = buildServer({
        db,
        packages: githubPackageSource({ cache, clientFor }),
        metrics,
        // A prime while this remote's job runs would only queue a second full scan behind it;
        // the running one is what the waiters wait for.
        enqueuePrime: (remote) => {
          if (!syncer.queue.isRunning(remote)) syncer.enqueue(remote, { prime: true });
        },
        onSynced: (listener) => syncedListeners.push(listener),
        coldWaitMs: need(config.coldWait, "coldWait"),
        ...(config.adminToken !== undefined ? { adminToken: config.adminToken } : {}),
        clock,
        logger: log,
        shutdown: shutdown.signal,
      });

      syncer.start();
      const listen = need(config.listen, "listen");
      let url: string;
      try {
        url = await app.listen({ host: listen.host, port: listen.port });
      } catch (err) {
        await syncer.stop();
        await cache.stop();
        await leases?.stop();
        throw err;
      }
      this.parts = { db, bucket: built.bucket, cache, leases, syncer, app, shutdown, url };
      log.info({ url, database: db.target, dataDir: config.dataDir }, "reposync is serving");
      return url;
    } catch (err) {
      if (!this.parts) await db.close().catch(() => {});
      throw err;
    }
  }

  private async stopParts(parts: Parts): Promise<void> {
    const log = this.logger;
    log.info("stopping");
    parts.shutdown.abort(new Error("reposync is stopping"));
    const drainMs = this.options.drainMs ?? DRAIN_MS;
    const cut = setTimeout(() => {
      log.warn({ drainMs }, "cutting the responses still in flight");
      parts.app.server.closeAllConnections();
    }, drainMs);
    try {
      await parts.app.close();
    } finally {
      clearTimeout(cut);
    }
    await parts.syncer.stop();
    await parts.cache.stop();
    await parts.leases?.stop();
    await parts.db.close();
    log.info("stopped");
  }
}
