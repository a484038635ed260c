import { timingSafeEqual } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { parseDuration } from "../config/duration.js";
import { ReposyncError } from "../errors.js";
import type { Queryable } from "../store/port.js";
import type { NewRemote, PackageMode } from "../store/remote-input.js";
import { addRemote, listRemotes, removeRemote } from "../store/remotes.js";
import { listSyncRecords } from "../store/sync-records.js";
import { requestSync } from "../store/sync-requests.js";

/** What the admin API uses. */
export interface AdminDeps {
  readonly db: Queryable;
  /** REPOSYNC_ADMIN_TOKEN; the routes are only registered when it is set. */
  readonly token: string;
  /** The server forgets what it remembered about a remote that was added or removed. */
  readonly forget: (remote: string) => void;
}

/** The JSON body of `POST /api/remotes`, as `add-remote` takes it. */
interface AddRemoteBody {
  name?: unknown;
  repo?: unknown;
  include?: unknown;
  exclude?: unknown;
  prereleases?: unknown;
  interval?: unknown;
  packages?: unknown;
  apiUrl?: unknown;
  tokenEnv?: unknown;
}

const usage = (message: string) => new ReposyncError("USAGE", message);

function stringList(value: unknown, field: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) {
    throw usage(`"${field}" must be a list of strings`);
  }
  return value;
}

function optionalString(value: unknown, field: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string") throw usage(`"${field}" must be a string`);
  return value;
}

/** Reads the body into a NewRemote; validation of the values themselves is the store's. */
export function newRemoteFromBody(body: unknown): NewRemote {
  if (typeof body !== "object" || body === null) throw usage("expected a JSON object");
  const b = body as AddRemoteBody;
  if (typeof b.name !== "string" || typeof b.repo !== "string") {
    throw usage('"name" and "repo" (OWNER/REPO) are required strings');
  }
  const interval = b.interval ?? "5m";
  let intervalMs: number;
  if (typeof interval === "number") intervalMs = interval;
  else if (typeof interval === "string") {
    try {
      intervalMs = parseDuration(interval, '"interval"');
    } catch (err) {
      throw usage((err as Error).message);
    }
  } else throw usage('"interval" must be a duration such as "5m" or milliseconds');
  const packages = b.packages ?? "cache";
  if (packages !== "cache" && packages !== "redirect") {
    throw usage('"packages" must be "cache" or "redirect"');
  }
  if (b.prereleases !== undefined && typeof b.prereleases !== "boolean") {
    throw usage('"prereleases" must be true or false');
  }
  return {
    name: b.name,
    repo: b.repo,
    include: stringList(b.include, "include"),
    exclude: stringList(b.exclude, "exclude"),
    prereleases: b.prereleases === true,
    intervalMs,
    packageMode: packages as PackageMode,
    apiUrl: optionalString(b.apiUrl, "apiUrl"),
    tokenEnv: optionalString(b.tokenEnv, "tokenEnv"),
  };
}

/** True when the request carries `Authorization: Bearer <token>`; compared in constant time. */
function authorized(request: FastifyRequest, token: string): boolean {
  const header = request.headers.authorization ?? "";
  const m = /^Bearer (.+)$/.exec(header);
  if (!m?.[1]) return false;
  const given = Buffer.from(m[1]);
  const wanted = Buffer.from(token);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

/**
 * The admin API, under `/api/`: list, add, remove and sync remotes, as the CLI does. Registered
 * only when REPOSYNC_ADMIN_TOKEN is set (without it, `/api/…` is a 404 like any unknown path),
 * and every request must carry that token as a bearer token, or gets 401.
 */
export function registerAdminRoutes(app: FastifyInstance, deps: AdminDeps): void {
  app.register(
    async (api) => {
      api.addHook("onRequest", async (request, reply) => {
        if (!authorized(request, deps.token)) {
          return reply
            .code(401)
            .header("www-authenticate", 'Bearer realm="reposync"')
            .send({ error: "UNAUTHORIZED", message: "a valid admin token is required" });
        }
      });

      api.get("/remotes", async () => {
        const [remotes, records] = await Promise.all([
          listRemotes(deps.db),
          listSyncRecords(deps.db),
        ]);
        return {
          remotes: remotes.map((r) => {
            const s = records.find((x) => x.remote === r.name);
            return {
              ...r,
              lastSyncedAt: s?.lastSyncedAt ?? null,
              lastResult: s?.lastResult ?? null,
              lastError: s?.lastError ?? null,
              packages: s?.summary?.packages ?? null,
            };
          }),
        };
      });

      api.post("/remotes", async (request, reply) => {
        const remote = await addRemote(deps.db, newRemoteFromBody(request.body));
        // A never-synced remote is primed by the syncer's next request poll (within a second),
        // on whichever replica gets its lease; nothing to enqueue here.
        deps.forget(remote.name);
        return reply.code(201).send(remote);
      });

      api.delete<{ Params: { name: string } }>("/remotes/:name", async (request, reply) => {
        await removeRemote(deps.db, request.params.name);
        deps.forget(request.params.name);
        return reply.code(204).send();
      });

      api.post<{ Params: { name: string } }>("/remotes/:name/sync", async (request, reply) => {
        // A mark in the database, as `reposync sync` sets: every replica's syncer polls for it.
        const [name] = await requestSync(deps.db, [request.params.name]);
        return reply.code(202).send({ requested: name });
      });
    },
    { prefix: "/api" },
  );
}
