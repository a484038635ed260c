import type { FastifyInstance } from "fastify";
import { Registry } from "prom-client";
import { countPackages } from "../store/packages.js";
import { type Queryable, sql } from "../store/port.js";
import { listRemotes } from "../store/remotes.js";
import { listSyncRecords } from "../store/sync-records.js";
import { baseUrlOf } from "./base-url.js";
import { renderIndexPage } from "./index-page.js";

/** The index page, health checks and metrics. */
export function registerSiteRoutes(
  app: FastifyInstance,
  deps: { readonly db: Queryable; readonly metricsText: () => Promise<string> },
): void {
  app.get("/", async (request, reply) => {
    const [remotes, counts, records] = await Promise.all([
      listRemotes(deps.db),
      countPackages(deps.db),
      listSyncRecords(deps.db),
    ]);
    const rows = remotes.map((remote) => ({
      remote,
      packages: counts.get(remote.name) ?? 0,
      sync: records.find((r) => r.remote === remote.name),
    }));
    return reply
      .type("text/html; charset=utf-8")
      .header("cache-control", "no-cache")
      .send(renderIndexPage(rows, baseUrlOf(request)));
  });

  // Liveness: the process answers. Nothing else, so a database outage does not get it killed.
  app.get("/healthz", async (_request, reply) => reply.type("text/plain").send("ok\n"));

  // Readiness: the database answers, so this replica can serve repodata.
  app.get("/readyz", async (request, reply) => {
    try {
      await deps.db.query(sql("select 1 as ok"));
      return reply.type("text/plain").send("ready\n");
    } catch (err) {
      request.log.warn({ err }, "readiness check: the database does not answer");
      return reply.code(503).type("text/plain").send("database unreachable\n");
    }
  });

  app.get("/metrics", async (_request, reply) => {
    const text = await deps.metricsText();
    return reply.type(Registry.PROMETHEUS_CONTENT_TYPE).send(text);
  });
}
