import { availableParallelism } from "node:os";
import { parseDuration } from "./duration.js";

/**
 * Value parsers for the config schema. Each takes the raw text and returns the typed value or
 * throws an Error whose message says what was expected; loadConfig prefixes the setting's name.
 */

/** A number greater than zero; fractions allowed (a rate of 0.5 per second is fine). */
export function positiveNumber(raw: string): number {
  const n = Number(raw.trim());
  if (raw.trim() === "" || !Number.isFinite(n) || n <= 0) {
    throw new Error("expected a number greater than zero");
  }
  return n;
}

/** A whole number in [min, max]. */
export function integerIn(min: number, max: number): (raw: string) => number {
  return (raw) => {
    const t = raw.trim();
    const n = Number(t);
    if (!/^\d+$/.test(t) || n < min || n > max) {
      throw new Error(`expected a whole number from ${min} to ${max}`);
    }
    return n;
  };
}

/** A number of worker processes, 1 to 64, or `auto`: one per CPU this process may use. */
export function workerCount(raw: string): number {
  if (raw.trim().toLowerCase() === "auto") return Math.min(64, availableParallelism());
  try {
    return integerIn(1, 64)(raw);
  } catch {
    throw new Error("expected auto or a whole number from 1 to 64");
  }
}

/** A duration such as 90s, 5m or 1h, in milliseconds. */
export function duration(raw: string): number {
  try {
    return parseDuration(raw);
  } catch {
    throw new Error("expected a duration such as 90s, 5m or 1h");
  }
}

/** An http(s) URL without a trailing slash, so callers can append paths. */
export function httpUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new Error("expected an http(s) URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new Error("expected an http(s) URL");
  }
  return url.toString().replace(/\/+$/, "");
}

/** Non-empty text, used as given. */
export function nonEmpty(raw: string): string {
  if (raw.trim() === "") throw new Error("must not be empty");
  return raw;
}

/** Where the HTTP server listens. */
export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** `HOST:PORT`, `[v6]:PORT` or `:PORT` (all interfaces). */
export function listenAddress(raw: string): ListenAddress {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(raw.trim());
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port > 65535) {
    throw new Error("expected HOST:PORT, e.g. 127.0.0.1:8080");
  }
  const host = m[1] ?? (m[2] === "" || m[2] === undefined ? "0.0.0.0" : m[2]);
  return Object.freeze({ host, port });
}

/**
 * systemd's STATE_DIRECTORY may list several directories separated by colons; the first one is
 * the unit's own StateDirectory=.
 */
export function stateDirectory(raw: string): string {
  const first = raw.split(":")[0]?.trim() ?? "";
  if (first === "") throw new Error("must not be empty");
  return first;
}
