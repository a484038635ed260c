import type { FastifyInstance } from "fastify";
import type { ListenAddress } from "../config/parsers.js";
import { ReposyncError } from "../errors.js";

/** What a person can do about the usual reasons an address cannot be listened on. */
const ADVICE: Readonly<Record<string, string>> = {
  EADDRINUSE: "another process listens there; stop it or choose another address",
  EACCES: "ports below 1024 need privileges; choose a port from 1024 up",
  EADDRNOTAVAIL: "no interface of this machine has that address",
};

/**
 * `app.listen` on `address`; the usual failures become one line that names the address and
 * says what to do (`--listen` or REPOSYNC_LISTEN), instead of a stack trace.
 */
export async function listenOn(app: FastifyInstance, address: ListenAddress): Promise<string> {
  try {
    return await app.listen({ host: address.host, port: address.port });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const advice = typeof code === "string" ? ADVICE[code] : undefined;
    if (advice === undefined) throw err;
    const where = address.host.includes(":")
      ? `[${address.host}]:${address.port}`
      : `${address.host}:${address.port}`;
    throw new ReposyncError(
      "CONFIG_INVALID",
      `cannot listen on ${where} (${code}): ${advice}, with --listen HOST:PORT or REPOSYNC_LISTEN`,
      { cause: err },
    );
  }
}
