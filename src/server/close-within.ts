import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";

/** How long stop() lets requests in flight finish before cutting their connections. */
export const DRAIN_MS = 4000;
/** How often a draining server closes the keep-alive connections that went idle. */
const IDLE_SWEEP_MS = 50;

/**
 * Closes `app`: it stops accepting, and requests in flight get `drainMs` to finish before their
 * connections are cut (a 200 MB download to a slow client is not worth a SIGKILL).
 */
export async function closeWithin(
  app: FastifyInstance,
  drainMs: number,
  log: Logger,
): Promise<void> {
  const server = app.server;
  const cut = setTimeout(() => {
    log.warn({ drainMs }, "cutting the responses still in flight");
    server.closeAllConnections();
  }, drainMs);
  // close() ends the connections idle at that moment; a response that finishes later leaves
  // its keep-alive connection open and idle (dnf's libcurl keeps them), which would hold the
  // stop for the whole drain and then be "cut". Node tells nothing when a connection turns idle,
  // so they are looked for while draining; new requests on them meanwhile get Connection: close.
  const sweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
  const closeAfter = (_req: unknown, res: { shouldKeepAlive: boolean }) => {
    res.shouldKeepAlive = false;
  };
  server.prependListener("request", closeAfter);
  try {
    await app.close();
  } finally {
    clearTimeout(cut);
    clearInterval(sweep);
    server.off("request", closeAfter);
  }
}
