import cluster, { type Worker } from "node:cluster";
import type { Logger } from "pino";
import { AggregatorRegistry } from "prom-client";
import type { Config } from "../config/schema.js";
import { type Engine, startEngine } from "../engine.js";
import { ReposyncError } from "../errors.js";
import { Lifecycle } from "../lifecycle.js";
import { DRAIN_MS } from "../server/close-within.js";
import type { PackageDownload } from "../store/package-downloads.js";
import type { Remote } from "../store/remote-input.js";
import { type ClusterMessage, ipcChannel, Rpc } from "./rpc.js";
import { PRIMARY_OPS, WORKER_OPS } from "./worker.js";

/** How long a worker's metrics may take before /metrics is answered without them. */
const COLLECT_MS = 2000;
/** A worker that dies sooner than this after its start is restarted only after a pause. */
const STEADY_MS = 10_000;
/** The longest pause before restarting a worker that keeps dying at once. */
const MAX_RESTART_DELAY_MS = 30_000;

export interface ClusterPrimaryOptions {
  readonly config: Config;
  readonly logger: Logger;
  /** How many HTTP worker processes (>= 2; one process is the plain Daemon). */
  readonly workers: number;
}

interface Member {
  readonly worker: Worker;
  readonly rpc: Rpc;
  readonly startedAt: number;
  /** Settles when the worker says it listens (its URL) or that it could not start. */
  readonly listening: Promise<string>;
  readonly exited: Promise<void>;
}

/**
 * The primary of `reposync serve --workers N`. It holds the only engine (database migrations,
 * the token bucket and GitHub clients, the package cache, the syncer: src/engine.ts) and forks
 * N worker processes that share the listening port (node:cluster hands connections out round
 * robin) and answer HTTP. One engine keeps everything the design counts per machine counted
 * once: one token bucket for every GitHub request, one coalesced download per package miss, one
 * syncer. Workers ask for packages and primes over IPC; the primary tells them when syncs end.
 *
 * A worker that dies is replaced (after a pause that grows while replacements keep dying at
 * once). stop() tells every worker to stop (each drains its requests, then cuts them), waits for
 * them to exit, then stops the engine: a package download a draining request waits for can end.
 */
export class ClusterPrimary {
  private engine: Engine | undefined;
  private readonly members = new Set<Member>();
  private readonly lifecycle = new Lifecycle(
    () => this.startParts(),
    () => this.close(),
  );
  private closing: Promise<void> | undefined;
  private restartDelayMs = 1000;
  private url: string | undefined;

  constructor(private readonly options: ClusterPrimaryOptions) {}

  /** Starts the engine, then the workers; resolves to the URL once every worker listens. */
  start(): Promise<string> {
    return this.lifecycle.start();
  }

  /** Stops the workers (each drains), then the engine; idempotent; waits for a start first. */
  stop(): Promise<void> {
    return this.lifecycle.stop();
  }

  private async startParts(): Promise<string> {
    const log = this.options.logger;
    this.engine = await startEngine({ config: this.options.config, logger: log });
    this.engine.onSynced((remote, failure) => {
      const note: ClusterMessage =
        failure === undefined ? { t: "synced", remote } : { t: "synced", remote, failure };
      for (const m of this.members) if (m.worker.isConnected()) m.worker.send(note);
    });
    try {
      const started = Array.from({ length: this.options.workers }, () => this.fork().listening);
      const urls = await Promise.all(started);
      this.url = urls[0] as string;
    } catch (err) {
      await this.close();
      throw err;
    }
    log.info(
      { url: this.url, workers: this.options.workers, database: this.engine.db.target },
      "reposync is serving",
    );
    return this.url;
  }

  private close(): Promise<void> {
    this.closing ??= (async () => {
      const log = this.options.logger;
      log.info("stopping");
      const members = [...this.members];
      for (const m of members) {
        if (m.worker.isConnected()) m.worker.send({ t: "stop" });
      }
      // A worker drains for DRAIN_MS at most, then cuts; one that is still there a second
      // later is stuck, and the engine must not wait for it.
      const deadline = setTimeout(() => {
        for (const m of members) {
          if (!m.worker.isDead()) {
            log.warn({ worker: m.worker.id }, "a worker did not stop in time; killing it");
            m.worker.process.kill("SIGKILL");
          }
        }
      }, DRAIN_MS + 1000);
      await Promise.all(members.map((m) => m.exited));
      clearTimeout(deadline);
      await this.engine?.stop();
      log.info("stopped");
    })();
    return this.closing;
  }

  private fork(): Member {
    const log = this.options.logger;
    const worker = cluster.fork();
    const channel = ipcChannel(worker);
    const engine = this.engine as Engine;
    const rpc = new Rpc(channel, {
      [PRIMARY_OPS.stored]: (args, signal) => {
        const { remote, pkg } = args as { remote: Remote; pkg: PackageDownload };
        return engine.packages.stored(remote, pkg, signal);
      },
      [PRIMARY_OPS.redirect]: (args, signal) => {
        const { remote, pkg } = args as { remote: Remote; pkg: PackageDownload };
        return engine.packages.redirect(remote, pkg, signal);
      },
      [PRIMARY_OPS.metricsText]: () => this.metricsText(),
    });
    channel.listen((message) => {
      if (message.t === "prime") engine.enqueuePrime(message.remote);
    });
    const listening = new Promise<string>((resolve, reject) => {
      channel.listen((message) => {
        if (message.t === "listening") resolve(message.url);
        if (message.t === "failed") {
          // Its own error, code and all (the CLI prints it once, from here).
          reject(
            message.code
              ? new ReposyncError(message.code, message.message)
              : new Error(message.message),
          );
        }
      });
      worker.once("exit", (code, signal) => {
        reject(new Error(`worker ${worker.id} exited (${signal ?? code}) before it listened`));
      });
    });
    listening.catch(() => {});
    const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
    const member: Member = { worker, rpc, startedAt: Date.now(), listening, exited };
    this.members.add(member);
    worker.once("exit", (code, signal) => {
      this.members.delete(member);
      rpc.close(new ReposyncError("ABORTED", `worker ${worker.id} exited`));
      if (this.closing || this.url === undefined) return;
      const lived = Date.now() - member.startedAt;
      this.restartDelayMs =
        lived >= STEADY_MS ? 1000 : Math.min(this.restartDelayMs * 2, MAX_RESTART_DELAY_MS);
      const delayMs = lived >= STEADY_MS ? 0 : this.restartDelayMs;
      log.error({ worker: worker.id, code, signal, restartInMs: delayMs }, "a worker died");
      setTimeout(() => {
        if (this.closing) return;
        this.fork().listening.then(
          (url) => log.info({ url }, "a replacement worker is serving"),
          (err: unknown) => log.error({ err }, "a replacement worker did not start"),
        );
      }, delayMs).unref();
    });
    return member;
  }

  /** Every process's metrics, summed (counters and histograms add up; gauges are the primary's). */
  private async metricsText(): Promise<string> {
    const engine = this.engine as Engine;
    const own = await engine.metrics.registry.getMetricsAsJSON();
    const theirs = await Promise.all(
      [...this.members].map((m) => {
        const signal = AbortSignal.timeout(COLLECT_MS);
        return (m.rpc.call(WORKER_OPS.metricsJson, null, signal) as Promise<object[]>).catch(
          () => [] as object[],
        );
      }),
    );
    return AggregatorRegistry.aggregate([own, ...theirs]).metrics();
  }
}
