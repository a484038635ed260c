import { createReadStream } from "node:fs";
import type { FastifyReply, FastifyRequest } from "fastify";
import { parseByteRange } from "./byte-range.js";

/** What a response carries besides its bytes. */
export interface Representation {
  /** A strong validator, quotes included (`"…"`). */
  readonly etag: string;
  readonly contentType: string;
  readonly cacheControl: string;
  /** Last-Modified as an HTTP date, when known. */
  readonly lastModified?: string;
}

/** Bytes to send: held in memory (repodata) or a stored file read by this response alone. */
export type Body =
  | { readonly kind: "buffer"; readonly bytes: Buffer }
  | { readonly kind: "file"; readonly path: string; readonly size: number };

/** True when an If-None-Match header names `etag` (or is `*`): the client's copy is current. */
export function matchesIfNoneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header
    .split(",")
    .map((t) => t.trim().replace(/^W\//, ""))
    .some((t) => t === etag || t === "*");
}

/**
 * Sends `body` with conditional GET (ETag, 304), HEAD and single byte ranges (206/416). A file
 * body gets its own read stream, so any number of responses read one stored package at once,
 * each at its own position; the stream ends with the response, also when the client leaves.
 */
export function sendBytes(
  request: FastifyRequest,
  reply: FastifyReply,
  body: Body,
  rep: Representation,
): FastifyReply {
  const size = body.kind === "buffer" ? body.bytes.length : body.size;
  reply
    .header("etag", rep.etag)
    .header("cache-control", rep.cacheControl)
    .header("accept-ranges", "bytes");
  if (rep.lastModified !== undefined) {
    reply.header("last-modified", rep.lastModified);
  }
  if (matchesIfNoneMatch(request.headers["if-none-match"], rep.etag)) {
    return reply.code(304).send();
  }

  // If-Range with another validator means "the copy I have part of is stale": send it whole.
  const ifRange = request.headers["if-range"] as string | undefined;
  const rangeHeader =
    ifRange === undefined || ifRange.trim() === rep.etag ? request.headers.range : undefined;
  const range = parseByteRange(rangeHeader, size);
  if (range === "unsatisfiable") {
    return reply.code(416).header("content-range", `bytes */${size}`).send();
  }
  const start = range?.start ?? 0;
  const end = range?.end ?? size - 1;
  const length = size === 0 ? 0 : end - start + 1;
  reply.header("content-type", rep.contentType).header("content-length", String(length));
  if (range) reply.code(206).header("content-range", `bytes ${start}-${end}/${size}`);
  if (request.method === "HEAD" || length === 0) return reply.send();
  if (body.kind === "buffer") {
    return reply.send(range ? body.bytes.subarray(start, end + 1) : body.bytes);
  }
  return reply.send(createReadStream(body.path, { start, end }));
}
