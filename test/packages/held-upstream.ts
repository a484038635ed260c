import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Countdown, type Deferred, deferred } from "./deferred.js";

/**
 * A real HTTP server on 127.0.0.1 that serves one file at `/pkg` and holds every response open
 * halfway: headers and the first half of the body go out at once, the rest only when the test
 * calls `release()`. That is how a test knows a download is in flight (`requests.reached(1)`)
 * and keeps it there as long as it likes, with no sleeping.
 */
export class HeldUpstream {
  readonly url: string;
  /** Bumped when a request arrives. */
  readonly requests = new Countdown();
  /** Bumped when a response was cut off by the client before its end. */
  readonly disconnects = new Countdown();
  /** What `/pkg` serves; tests swap it (a corrupt upstream) between attempts. */
  content: Uint8Array;
  /** Answer with this status and no file instead. */
  failWith: number | undefined;
  /** Send no Content-Length (chunked), as some servers do. */
  chunked = false;
  private gate: Deferred<void> = deferred();

  private constructor(
    private readonly server: Server,
    content: Uint8Array,
  ) {
    this.content = content;
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/pkg`;
  }

  static async start(content: Uint8Array): Promise<HeldUpstream> {
    let upstream: HeldUpstream | undefined;
    const server = createServer((_req, res) => {
      const self = upstream;
      if (!self) return res.destroy();
      self.requests.bump();
      if (self.failWith !== undefined) {
        res.writeHead(self.failWith, { "content-type": "text/plain" });
        res.end("no");
        return;
      }
      const bytes = self.content;
      const half = Math.floor(bytes.length / 2);
      res.on("close", () => {
        if (!res.writableFinished) self.disconnects.bump();
      });
      res.writeHead(200, {
        "content-type": "application/octet-stream",
        ...(self.chunked ? {} : { "content-length": String(bytes.length) }),
      });
      res.write(bytes.subarray(0, half));
      void self.gate.promise.then(() => {
        if (!res.destroyed) res.end(bytes.subarray(half));
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    upstream = new HeldUpstream(server, content);
    return upstream;
  }

  /** Lets every held response (and every later one) finish. */
  release(): void {
    this.gate.resolve();
  }

  /** Holds responses again from now on. */
  hold(): void {
    this.gate = deferred();
  }

  async close(): Promise<void> {
    this.release();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
