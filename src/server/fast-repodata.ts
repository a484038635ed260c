import type { IncomingMessage, ServerResponse } from "node:http";
import type { ServerMetrics } from "./metrics.js";
import { isRemoteName, isRepodataFileName } from "./names.js";
import type { RepoReader } from "./repo-reader.js";
import { matchesIfNoneMatch } from "./send-bytes.js";

/** The route names the fast path reports to metrics: the same as the fastify routes'. */
const REPOMD_ROUTE = "/:remote/repodata/repomd.xml";
const FILE_ROUTE = "/:remote/repodata/:file";
const REPODATA_URL = /^\/([^/?#%]+)\/repodata\/([^/?#%]+)$/;

/**
 * Answers the plainest repodata requests straight from node:http, before fastify sees them:
 * a GET or HEAD of `/<remote>/repodata/<file>` with no Range, whose answer is already in the
 * reader's memory. Returns false for everything else, which fastify's routes then handle (and
 * they answer these requests with the same status, headers and bytes; a test holds the two
 * paths to that).
 *
 * Why: repomd.xml is what every dnf of a fleet asks for on every makecache, and fastify's
 * per-request machinery (request and reply objects, hooks, the router) costs about 40% of the
 * throughput of a bare node:http answer on these tiny bodies (`npm run bench:serve`). The
 * answer itself is a lookup either way. Only used while no request lines are logged: a server
 * that logs each request goes through fastify for all of them.
 */
export function fastRepodata(
  reader: RepoReader,
  metrics: ServerMetrics,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  return (req, res) => {
    const method = req.method;
    if ((method !== "GET" && method !== "HEAD") || req.headers.range !== undefined) return false;
    const match = REPODATA_URL.exec(req.url ?? "");
    const remote = match?.[1];
    const file = match?.[2];
    if (remote === undefined || file === undefined || !isRemoteName(remote)) return false;
    const started = performance.now();

    // One header object and one writeHead: a setHeader per header costs ~20% of the
    // throughput at these rates.
    let route: string;
    let bytes: Buffer;
    let headers: Record<string, string>;
    if (file === "repomd.xml") {
      const known = reader.peekSnapshot(remote)?.value;
      if (!known) return false;
      route = REPOMD_ROUTE;
      bytes = known.snapshot.repomd;
      headers = {
        etag: known.snapshot.etag,
        "cache-control": "no-cache",
        "accept-ranges": "bytes",
        "last-modified": known.snapshot.lastModified,
      };
    } else {
      if (!isRepodataFileName(file)) return false;
      const known = reader.peekFile(remote, file)?.value;
      if (!known) return false;
      route = FILE_ROUTE;
      bytes = known;
      headers = {
        etag: `"${file}"`,
        "cache-control": "public, max-age=31536000, immutable",
        "accept-ranges": "bytes",
      };
    }

    if (matchesIfNoneMatch(req.headers["if-none-match"], headers.etag as string)) {
      res.writeHead(304, headers);
      res.end();
    } else {
      headers["content-type"] =
        route === REPOMD_ROUTE
          ? "text/xml; charset=utf-8"
          : file.endsWith(".gz")
            ? "application/gzip"
            : "application/octet-stream";
      headers["content-length"] = String(bytes.length);
      res.writeHead(200, headers);
      if (method === "HEAD" || bytes.length === 0) res.end();
      else res.end(bytes);
    }
    metrics.request(route, method, res.statusCode, (performance.now() - started) / 1000);
    return true;
  };
}
