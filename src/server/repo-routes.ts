import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ReposyncError } from "../errors.js";
import { findPackageDownload } from "../store/package-downloads.js";
import type { Queryable } from "../store/port.js";
import { baseUrlOf } from "./base-url.js";
import type { ColdWait } from "./cold-wait.js";
import type { ServerMetrics } from "./metrics.js";
import { isAssetFileName, isRemoteName, isRepodataFileName, parseAssetId } from "./names.js";
import type { PackageSource } from "./package-source.js";
import { repoFileFor } from "./repo-file.js";
import type { RepoReader, ServedSnapshot } from "./repo-reader.js";
import { sendBytes } from "./send-bytes.js";

/** What the repository routes use. */
export interface RepoRouteDeps {
  readonly db: Queryable;
  readonly reader: RepoReader;
  readonly coldWait: ColdWait<ServedSnapshot>;
  readonly coldWaitMs: number;
  readonly packages: PackageSource;
  readonly metrics: ServerMetrics;
  /** Aborts at shutdown: cold waits end at once (503) instead of holding the drain. */
  readonly shutdown?: AbortSignal;
}

const badName = (what: string) => new ReposyncError("USAGE", `malformed ${what} in the URL`);
const notFound = (what: string) => new ReposyncError("NOT_FOUND", `no such ${what}`);

/**
 * A signal that aborts when the client goes away before its response was sent in full, so a
 * package fetch can let this caller leave (the download itself goes on for the others).
 */
function clientGone(reply: FastifyReply, shutdown?: AbortSignal): AbortSignal {
  const controller = new AbortController();
  const gone = () => controller.abort(new Error("the client went away"));
  const stopping = () => controller.abort(shutdown?.reason);
  if (shutdown?.aborted) stopping();
  shutdown?.addEventListener("abort", stopping, { once: true });
  reply.raw.once("close", () => {
    // A long-lived server sees millions of requests: leave no listener on the shared signal.
    shutdown?.removeEventListener("abort", stopping);
    if (!reply.raw.writableFinished) gone();
  });
  return controller.signal;
}

/**
 * The routes dnf uses: repomd.xml (revalidated on every makecache), the hashed repodata files
 * (immutable, still served during the grace hour after a snapshot replaced them), packages, and
 * a ready .repo file. Every name in a URL is checked against the store's rules first and only
 * ever used as a database key: no route builds a file path from the URL.
 */
export function registerRepoRoutes(app: FastifyInstance, deps: RepoRouteDeps): void {
  const { reader } = deps;

  async function knownRemote(name: string) {
    if (!isRemoteName(name)) throw badName("remote name");
    const remote = await reader.remote(name);
    if (remote === undefined) throw notFound(`remote "${name}"`);
    return remote;
  }

  const sendRepomd = (request: FastifyRequest, reply: FastifyReply, snapshot: ServedSnapshot) =>
    sendBytes(
      request,
      reply,
      { kind: "buffer", bytes: snapshot.repomd },
      {
        etag: snapshot.etag,
        contentType: "text/xml; charset=utf-8",
        // Revalidated on every use: the ETag makes that a 304 when nothing changed.
        cacheControl: "no-cache",
        lastModified: snapshot.lastModified,
      },
    );

  const sendFile = (request: FastifyRequest, reply: FastifyReply, file: string, bytes: Buffer) =>
    sendBytes(
      request,
      reply,
      { kind: "buffer", bytes },
      {
        // The name carries the file's sha256, so it is its own validator.
        etag: `"${file}"`,
        contentType: file.endsWith(".gz") ? "application/gzip" : "application/octet-stream",
        cacheControl: "public, max-age=31536000, immutable",
      },
    );

  async function repomd(request: FastifyRequest, reply: FastifyReply, name: string) {
    const remote = await knownRemote(name);
    let snapshot = await reader.snapshot(remote.name);
    if (snapshot === undefined) {
      const waited = await deps.coldWait.wait(remote.name, clientGone(reply, deps.shutdown));
      deps.metrics.coldWait(waited.kind === "ready" ? "served" : waited.kind);
      if (waited.kind !== "ready") {
        const why =
          waited.kind === "failed"
            ? `the first sync of remote "${remote.name}" failed: ${waited.reason}; retry later (reposync status shows more)`
            : `remote "${remote.name}" is being synced for the first time; retry shortly`;
        return reply
          .code(503)
          .header("retry-after", String(Math.max(1, Math.ceil(deps.coldWaitMs / 1000))))
          .header("cache-control", "no-store")
          .type("text/plain; charset=utf-8")
          .send(`${why}\n`);
      }
      snapshot = waited.snapshot;
    }
    return sendRepomd(request, reply, snapshot);
  }

  async function repodataFile(
    request: FastifyRequest,
    reply: FastifyReply,
    name: string,
    file: string,
  ) {
    const remote = await knownRemote(name);
    if (!isRepodataFileName(file)) throw badName("repodata file name");
    const bytes = await reader.file(remote.name, file);
    if (bytes === undefined) throw notFound(`repodata file "${file}"`);
    return sendFile(request, reply, file, bytes);
  }

  // The two repodata routes answer from memory in the tick the request arrived when they can
  // (peek), and only otherwise go through the awaited reads: at the request rates dnf fleets
  // produce for repomd.xml, the promises of an async handler are a good part of the cost.
  app.route<{ Params: { remote: string } }>({
    // HEAD by hand: fastify's automatic HEAD route would drop our Content-Length.
    method: ["GET", "HEAD"],
    url: "/:remote/repodata/repomd.xml",
    handler: (request, reply) => {
      const known = reader.peekSnapshot(request.params.remote);
      if (known) {
        sendRepomd(request, reply, known.value.snapshot);
        return;
      }
      return repomd(request, reply, request.params.remote);
    },
  });

  app.route<{ Params: { remote: string; file: string } }>({
    method: ["GET", "HEAD"],
    url: "/:remote/repodata/:file",
    handler: (request, reply) => {
      const { remote, file } = request.params;
      const known = reader.peekFile(remote, file);
      if (known) {
        sendFile(request, reply, file, known.value);
        return;
      }
      return repodataFile(request, reply, remote, file);
    },
  });

  app.route<{ Params: { remote: string; assetId: string; name: string } }>({
    // HEAD by hand: fastify's automatic HEAD route would drop our Content-Length.
    method: ["GET", "HEAD"],
    url: "/:remote/packages/:assetId/:name",
    handler: async (request, reply) => {
      const remote = await knownRemote(request.params.remote);
      const assetId = parseAssetId(request.params.assetId);
      if (assetId === undefined) throw badName("asset id");
      if (!isAssetFileName(request.params.name)) throw badName("package file name");
      const pkg = await findPackageDownload(deps.db, remote.name, assetId);
      if (pkg === undefined || pkg.name !== request.params.name) {
        throw notFound(`package ${assetId}/${request.params.name}`);
      }
      const signal = clientGone(reply, deps.shutdown);
      if (remote.packageMode === "redirect") {
        const location = await deps.packages.redirect(remote, pkg, signal).catch((err: unknown) => {
          if (signal.aborted)
            throw new ReposyncError("ABORTED", "the request ended early", { cause: err });
          throw err;
        });
        return reply.code(302).header("cache-control", "no-store").redirect(location, 302);
      }
      const stored = await deps.packages.stored(remote, pkg, signal).catch((err: unknown) => {
        // The client left (or we are stopping) while the download ran on for the others.
        if (signal.aborted)
          throw new ReposyncError("ABORTED", "the request ended early", { cause: err });
        throw err;
      });
      return sendBytes(
        request,
        reply,
        { kind: "file", path: stored.path, size: stored.size },
        {
          etag: `"${stored.sha256}"`,
          contentType: "application/x-rpm",
          // An asset id can be re-uploaded with new bytes; the digest ETag makes revalidation cheap.
          cacheControl: "public, no-cache",
        },
      );
    },
  });

  // `/<remote>.repo`: one parametric segment, since a route cannot split "name" from ".repo".
  app.get<{ Params: { file: string } }>("/:file", async (request, reply) => {
    const { file } = request.params;
    if (!file.endsWith(".repo")) throw notFound("page");
    const remote = await knownRemote(file.slice(0, -".repo".length));
    return reply
      .type("text/plain; charset=utf-8")
      .header("cache-control", "no-cache")
      .send(repoFileFor(remote, baseUrlOf(request)));
  });
}
