import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import { isReposyncError } from "../errors.js";
import { type Clock, systemClock } from "../github/clock.js";
import type { Queryable } from "../store/port.js";
import { registerAdminRoutes } from "./admin-routes.js";
import { ColdWait } from "./cold-wait.js";
import { fastRepodata } from "./fast-repodata.js";
import { httpStatusFor } from "./http-status.js";
import type { ServerMetrics } from "./metrics.js";
import type { PackageSource } from "./package-source.js";
import { RepoReader, type ServedSnapshot } from "./repo-reader.js";
import { registerRepoRoutes } from "./repo-routes.js";
import { registerSiteRoutes } from "./site-routes.js";

/** Levels at which fastify logs no line per request. */
const QUIET_LEVELS = new Set(["fatal", "error", "warn", "silent"]);

/** Everything the HTTP server needs; the daemon builds it, tests pass their own parts. */
export interface ServerDeps {
  readonly db: Queryable;
  readonly packages: PackageSource;
  readonly metrics: ServerMetrics;
  /** Asks the syncer for a prime of a cold remote. */
  readonly enqueuePrime: (remote: string) => void;
  /**
   * Subscribes to "a sync of this remote ended in this process" (with its error when it
   * failed), so that cold waits look at once instead of at their next poll, and end early
   * when the sync failed. Optional: without it they poll.
   */
  readonly onSynced?: (listener: (remote: string, failure?: string) => void) => void;
  /** REPOSYNC_COLD_WAIT in milliseconds. */
  readonly coldWaitMs: number;
  /** How often a cold wait looks for the snapshot by itself (250 ms). */
  readonly coldPollMs?: number;
  /** REPOSYNC_ADMIN_TOKEN; the admin API exists only with it. */
  readonly adminToken?: string;
  readonly clock?: Clock;
  /** pino logger for fastify; none means no request logging (tests). */
  readonly logger?: FastifyBaseLogger;
  /** Aborted when the process stops: cold waits give up at once. */
  readonly shutdown?: AbortSignal;
  /** How long remotes and snapshots are remembered (RepoReader, 1 s). */
  readonly freshMs?: number;
  /**
   * The text /metrics answers; default: `metrics`' registry. A cluster worker passes the whole
   * cluster's, summed over its processes by the primary.
   */
  readonly metricsText?: () => Promise<string>;
}

/**
 * Builds the fastify server without listening: `serve` listens, tests use inject(). Errors map
 * to statuses in one place (http-status.ts); a failure without a code is a bug and answers 500
 * with no detail beyond the log.
 */
export function buildServer(deps: ServerDeps): FastifyInstance {
  const clock = deps.clock ?? systemClock;
  const reader = new RepoReader({
    db: deps.db,
    clock,
    ...(deps.freshMs !== undefined ? { freshMs: deps.freshMs } : {}),
  });
  // Plain repodata GETs answered from memory skip fastify (fast-repodata.ts), unless every
  // request is to be logged: then all of them go through fastify, which logs them.
  const logsRequests = deps.logger !== undefined && !QUIET_LEVELS.has(deps.logger.level);
  const fast = logsRequests ? undefined : fastRepodata(reader, deps.metrics);
  const app = Fastify({
    ...(fast
      ? {
          serverFactory: (handler: (req: IncomingMessage, res: ServerResponse) => void) =>
            createServer((req, res) => {
              if (!fast(req, res)) handler(req, res);
            }),
        }
      : {}),
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    // A child logger per request (for its reqId) only pays when request lines are logged;
    // at warn and above the few lines left go out without it.
    childLoggerFactory: (logger, bindings, options) =>
      QUIET_LEVELS.has(logger.level) ? logger : logger.child(bindings, options),
    // Connections a client keeps open idle are closed at once by close(); in-flight ones finish.
    forceCloseConnections: "idle",
    // A reverse proxy in front may not pass exotic URLs through; we refuse them ourselves.
    routerOptions: { maxParamLength: 300 },
  });
  const coldWait = new ColdWait<ServedSnapshot>({
    enqueuePrime: deps.enqueuePrime,
    load: (remote) => reader.snapshot(remote, { fresh: true }),
    waitMs: deps.coldWaitMs,
    ...(deps.coldPollMs !== undefined ? { pollMs: deps.coldPollMs } : {}),
    clock,
  });
  deps.onSynced?.((remote, failure) => coldWait.notify(remote, failure));

  app.setErrorHandler((err, request, reply) => {
    if (isReposyncError(err)) {
      const status = httpStatusFor(err.code);
      // A client that is gone is no server trouble; everything else 5xx is worth a line.
      if (status >= 500 && !request.raw.destroyed) {
        request.log.warn({ err, code: err.code }, "request failed");
      }
      return reply.code(status).send({ error: err.code, message: err.message });
    }
    const status = (err as { statusCode?: unknown }).statusCode;
    if (typeof status === "number" && status >= 400 && status < 500) {
      // fastify's own refusals: a malformed URL, a bad JSON body.
      const message = err instanceof Error ? err.message : "bad request";
      return reply.code(status).send({ error: "BAD_REQUEST", message });
    }
    request.log.error({ err }, "unexpected error");
    return reply.code(500).send({ error: "INTERNAL", message: "internal error" });
  });
  app.setNotFoundHandler((_request, reply) =>
    reply.code(404).send({ error: "NOT_FOUND", message: "not found" }),
  );
  // A callback hook, not an async one: it runs on every response, and a promise per request
  // is measurable at repomd.xml rates.
  app.addHook("onResponse", (request, reply, done) => {
    deps.metrics.request(
      request.routeOptions.url ?? "unmatched",
      request.method,
      reply.statusCode,
      reply.elapsedTime / 1000,
    );
    done();
  });

  registerSiteRoutes(app, {
    db: deps.db,
    metricsText: deps.metricsText ?? (() => deps.metrics.registry.metrics()),
  });
  registerRepoRoutes(app, {
    db: deps.db,
    reader,
    coldWait,
    coldWaitMs: deps.coldWaitMs,
    packages: deps.packages,
    metrics: deps.metrics,
    ...(deps.shutdown ? { shutdown: deps.shutdown } : {}),
  });
  if (deps.adminToken !== undefined) {
    registerAdminRoutes(app, {
      db: deps.db,
      token: deps.adminToken,
      forget: (remote) => reader.forget(remote),
    });
  }
  return app;
}
