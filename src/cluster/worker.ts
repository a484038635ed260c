import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { need } from "../config/need.js";
import type { Config } from "../config/schema.js";
import type { SyncedListener } from "../engine.js";
import { Lifecycle } from "../lifecycle.js";
import type { StoredPackage } from "../packages/content-store.js";
import { buildServer } from "../server/build-server.js";
import { closeWithin, DRAIN_MS } from "../server/close-within.js";
import { listenOn } from "../server/listen.js";
import { ServerMetrics } from "../server/metrics.js";
import type { PackageSource } from "../server/package-source.js";
import { openDatabase } from "../store/open-database.js";
import type { Database } from "../store/port.js";
import { type Channel, Rpc } from "./rpc.js";

/** The operations a worker answers for the primary. */
export const WORKER_OPS = { metricsJson: "metricsJson" } as const;
/** The operations the primary answers for its workers. */
export const PRIMARY_OPS = {
  stored: "stored",
  redirect: "redirect",
  metricsText: "metricsText",
} as const;

export interface ClusterWorkerOptions {
  readonly config: Config;
  readonly logger: Logger;
  /** The channel to the primary (`process` in a real worker). */
  readonly channel: Channel;
  /** Overrides DRAIN_MS (tests). */
  readonly drainMs?: number;
}

/**
 * One HTTP process of `reposync serve --workers N`: the same fastify server as the single
 * process (every route, the repodata fast path, cold waits), reading the database itself, and
 * reaching the primary's engine through IPC for what must happen once per machine: package
 * downloads (one coalescing cache, one token bucket), primes (one syncer), and /metrics (the
 * sum over every process). The primary tells it when a sync ended, which wakes its cold waits
 * as in one process.
 */
export class ClusterWorker {
  private app: FastifyInstance | undefined;
  private db: Database | undefined;
  private rpc: Rpc | undefined;
  private readonly shutdown = new AbortController();
  private readonly lifecycle = new Lifecycle(
    () => this.startParts(),
    () => this.stopParts(),
  );

  constructor(private readonly options: ClusterWorkerOptions) {}

  /** Opens the database, builds the server and listens; resolves to its URL. */
  start(): Promise<string> {
    return this.lifecycle.start();
  }

  private async startParts(): Promise<string> {
    const { config, logger: log, channel } = this.options;
    const metrics = new ServerMetrics();
    const rpc = new Rpc(channel, {
      [WORKER_OPS.metricsJson]: () => metrics.registry.getMetricsAsJSON(),
    });
    this.rpc = rpc;
    const synced: SyncedListener[] = [];
    channel.listen((message) => {
      if (message.t === "synced") for (const l of synced) l(message.remote, message.failure);
    });
    const packages: PackageSource = {
      stored: (remote, pkg, signal) =>
        rpc.call(PRIMARY_OPS.stored, { remote, pkg }, signal) as Promise<StoredPackage>,
      redirect: (remote, pkg, signal) =>
        rpc.call(PRIMARY_OPS.redirect, { remote, pkg }, signal) as Promise<string>,
    };
    // The primary migrated the schema before it forked us.
    const db = await openDatabase(config.database);
    this.db = db;
    const app = buildServer({
      db,
      packages,
      metrics,
      metricsText: () => rpc.call(PRIMARY_OPS.metricsText, null) as Promise<string>,
      enqueuePrime: (remote) => channel.send({ t: "prime", remote }),
      onSynced: (listener) => synced.push(listener),
      coldWaitMs: need(config.coldWait, "coldWait"),
      ...(config.adminToken !== undefined ? { adminToken: config.adminToken } : {}),
      logger: log,
      shutdown: this.shutdown.signal,
    });
    this.app = app;
    return listenOn(app, need(config.listen, "listen"));
  }

  /** Stops accepting, drains (then cuts) the requests in flight, closes the database. */
  stop(): Promise<void> {
    return this.lifecycle.stop();
  }

  private async stopParts(): Promise<void> {
    this.shutdown.abort(new Error("reposync is stopping"));
    if (this.app)
      await closeWithin(this.app, this.options.drainMs ?? DRAIN_MS, this.options.logger);
    this.rpc?.close(new Error("this worker stopped"));
    await this.db?.close();
  }
}
