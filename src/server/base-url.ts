import type { FastifyRequest } from "fastify";
import { ReposyncError } from "../errors.js";

/**
 * The URL clients reach this server at, from the request itself (`Host`, and the scheme fastify
 * saw), so the .repo file and the index page name the address the client used. The host is
 * checked to be a plain host[:port]: it is written into files dnf reads.
 */
export function baseUrlOf(request: FastifyRequest): string {
  const host = request.host;
  if (!/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/.test(host)) {
    throw new ReposyncError("USAGE", "malformed Host header");
  }
  return `${request.protocol}://${host}`;
}
