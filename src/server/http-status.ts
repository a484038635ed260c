import type { ErrorCode } from "../errors.js";

/**
 * The HTTP status of every ReposyncError code, in one place. Upstream trouble is the gateway's
 * (502, or 504 for a timeout); what a client may retry soon (the database or GitHub's budget
 * briefly unavailable, a shutdown) is 503; our own storage failing is 500.
 */
const STATUS: Readonly<Record<ErrorCode, number>> = {
  RPM_TRUNCATED: 502,
  RPM_BAD_LEAD: 502,
  RPM_BAD_HEADER: 502,
  RPM_LIMIT: 502,
  RPM_MISSING_TAG: 502,
  RPM_SIZE_MISMATCH: 502,
  RPM_FORBIDDEN_TEXT: 502,
  CONFIG_INVALID: 400,
  USAGE: 400,
  NOT_FOUND: 404,
  CONFLICT: 409,
  DB_UNREACHABLE: 503,
  DB_ERROR: 500,
  IO_ERROR: 500,
  GITHUB_HTTP: 502,
  GITHUB_RATE_LIMITED: 503,
  UPSTREAM_MISMATCH: 502,
  TIMEOUT: 504,
  ABORTED: 503,
  SYNC_FAILED: 502,
};

/** The status a response for a ReposyncError with `code` carries. */
export function httpStatusFor(code: ErrorCode): number {
  return STATUS[code];
}
