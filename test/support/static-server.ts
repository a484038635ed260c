import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import * as path from "node:path";

/** A running static file server for tests; see {@link startStaticServer}. */
export interface StaticServer {
  /** `http://127.0.0.1:PORT/`, with the trailing slash dnf's baseurl wants. */
  readonly url: string;
  readonly port: number;
  /** Requests per URL path (decoded, without the query), GET and HEAD alike, in arrival order. */
  readonly requests: ReadonlyMap<string, number>;
  /** How many requests arrived for one path (0 when none). */
  requestCount(urlPath: string): number;
  /** Stops listening and ends open keep-alive connections; resolves once the server is closed. */
  close(): Promise<void>;
}

/**
 * Serves the files under `root` on 127.0.0.1 on a free port: GET and HEAD only, 404 for anything
 * missing or outside root, no directory listings. Written on node:http rather than a library
 * because tests need exactly this and a request count per path, nothing more.
 */
export async function startStaticServer(root: string): Promise<StaticServer> {
  const base = path.resolve(root);
  const requests = new Map<string, number>();

  const server: Server = createServer((req, res) => {
    void (async () => {
      let urlPath: string;
      try {
        urlPath = decodeURIComponent(new URL(req.url ?? "/", "http://127.0.0.1").pathname);
      } catch {
        res.writeHead(400).end();
        return;
      }
      requests.set(urlPath, (requests.get(urlPath) ?? 0) + 1);
      if (req.method !== "GET" && req.method !== "HEAD") {
        res.writeHead(405, { allow: "GET, HEAD" }).end();
        return;
      }
      const file = path.resolve(base, `.${urlPath}`);
      if (file !== base && !file.startsWith(base + path.sep)) {
        res.writeHead(404).end();
        return;
      }
      const info = await stat(file).catch(() => undefined);
      if (info === undefined || !info.isFile()) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, {
        "content-length": info.size,
        "content-type": "application/octet-stream",
      });
      if (req.method === "HEAD") {
        res.end();
        return;
      }
      const stream = createReadStream(file);
      stream.on("error", () => res.destroy());
      stream.pipe(res);
    })().catch(() => res.destroy());
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/`,
    port,
    requests,
    requestCount: (urlPath) => requests.get(urlPath) ?? 0,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // close() waits for idle keep-alive sockets (dnf keeps them open): end them now.
        server.closeAllConnections();
      }),
  };
}
