import { type Agent, get, type IncomingMessage } from "node:http";
import { deferred } from "../packages/deferred.js";

/**
 * A GET whose body the client does not read until the test says so: once the headers are in,
 * the client's buffers fill and the server's writes back up, so a body larger than the socket
 * buffers of both ends stays in flight as long as the test likes (a stalled dnf client).
 * `agent: false` (the default) is a connection of its own, closed after the response; pass a
 * keep-alive Agent to keep it open as dnf's libcurl does.
 */
export function stalledGet(url: string, agent: Agent | false = false) {
  const response = deferred<IncomingMessage>();
  const req = get(url, { agent }, (res) => {
    res.pause();
    response.resolve(res);
  });
  req.on("error", (err) => response.reject(err));
  return {
    /** The status and Content-Length, once the headers arrived (the body is still unread). */
    headers: response.promise.then((res) => ({
      status: res.statusCode,
      length: Number(res.headers["content-length"]),
    })),
    /** Reads the body until the connection or the message ends. */
    async readToEnd(): Promise<{ received: number; complete: boolean; error?: Error }> {
      const res = await response.promise;
      let received = 0;
      let error: Error | undefined;
      res.on("data", (chunk: Buffer) => {
        received += chunk.length;
      });
      // A cut connection is an "aborted" error here.
      res.on("error", (err) => {
        error = err;
      });
      // Paused by hand at the headers: a data listener alone would not start it again.
      res.resume();
      await new Promise<void>((done) => res.once("close", () => done()));
      return { received, complete: res.complete, ...(error ? { error } : {}) };
    },
  };
}
