import { randomBytes } from "node:crypto";
import { hostname } from "node:os";

/**
 * A lease owner id unique among every process that shares the database: host and pid say who it
 * is in `status`; the random part keeps a restarted process (same pid in a new container) from
 * mistaking its predecessor's lease for its own.
 */
export function newOwnerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
}
