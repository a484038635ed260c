import type { FastifyInstance } from "fastify";
import { type Logger, pino } from "pino";
import { need } from "./config/need.js";
import type { Config } from "./config/schema.js";
import { type Engine, startEngine } from "./engine.js";
import type { Clock } from "./github/clock.js";
import { Lifecycle } from "./lifecycle.js";
import { buildServer } from "./server/build-server.js";
import { closeWithin, DRAIN_MS } from "./server/close-within.js";
import { listenOn } from "./server/listen.js";
import type { Remote } from "./store/remote-input.js";

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
  /** Overrides the package downloads' grace at stop, 3 s (tests). */
  readonly cacheGraceMs?: number;
}

/** The running parts, in start order. */
interface Parts {
  engine: Engine;
  app: FastifyInstance;
  shutdown: AbortController;
  url: string;
}

/**
 * `reposync serve` in one process, as an object: the engine (database, GitHub clients, package
 * cache, syncer; src/engine.ts), then the HTTP server, started in that order and stopped in the
 * reverse one. start() and stop() are idempotent; stop() during start() waits for it first.
 * (With `--workers N`, src/cluster/ runs the same parts over N+1 processes.)
 *
 * Stopping is bounded so that systemd's stop (TimeoutStopSec, 10 s here by design) never has
 * to kill us: the server stops accepting and gives requests in flight DRAIN_MS, then cuts what
 * is left; cold waits end at once. Then the syncer's jobs are aborted through their signal
 * (each commits what it read and releases its lease), package downloads get their grace, and
 * the database is closed.
 */
export class Daemon {
  readonly logger: Logger;
  private parts: Parts | undefined;
  private readonly lifecycle = new Lifecycle(
    () => this.startParts(),
    async () => {
      if (this.parts) await this.stopParts(this.parts);
    },
  );

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
    return this.lifecycle.start();
  }

  /** Stops everything, in reverse order; idempotent. */
  stop(): Promise<void> {
    return this.lifecycle.stop();
  }

  private async startParts(): Promise<string> {
    const { config } = this.options;
    const log = this.logger;
    const engine = await startEngine({
      config,
      logger: log,
      ...(this.options.clock ? { clock: this.options.clock } : {}),
      ...(this.options.tokenFor ? { tokenFor: this.options.tokenFor } : {}),
      ...(this.options.requestPollMs !== undefined
        ? { requestPollMs: this.options.requestPollMs }
        : {}),
      ...(this.options.cacheGraceMs !== undefined
        ? { cacheGraceMs: this.options.cacheGraceMs }
        : {}),
    });
    const shutdown = new AbortController();
    let url: string;
    let app: FastifyInstance;
    try {
      app = buildServer({
        db: engine.db,
        packages: engine.packages,
        metrics: engine.metrics,
        enqueuePrime: (remote) => engine.enqueuePrime(remote),
        onSynced: (listener) => engine.onSynced(listener),
        coldWaitMs: need(config.coldWait, "coldWait"),
        ...(config.adminToken !== undefined ? { adminToken: config.adminToken } : {}),
        ...(this.options.clock ? { clock: this.options.clock } : {}),
        logger: log,
        shutdown: shutdown.signal,
      });
      url = await listenOn(app, need(config.listen, "listen"));
    } catch (err) {
      await engine.stop();
      throw err;
    }
    this.parts = { engine, app, shutdown, url };
    log.info({ url, database: engine.db.target, dataDir: config.dataDir }, "reposync is serving");
    return url;
  }

  private async stopParts(parts: Parts): Promise<void> {
    const log = this.logger;
    log.info("stopping");
    parts.shutdown.abort(new Error("reposync is stopping"));
    await closeWithin(parts.app, this.options.drainMs ?? DRAIN_MS, log);
    await parts.engine.stop();
    log.info("stopped");
  }
}
