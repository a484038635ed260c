/**
 * Every failure reposync expects carries a code. The CLI maps codes to one line and an exit
 * status, the server to an HTTP status; anything without a code is a bug and is shown as one.
 */
export type ErrorCode =
  // RPM parsing: the input is not a package we can read.
  | "RPM_TRUNCATED"
  | "RPM_BAD_LEAD"
  | "RPM_BAD_HEADER"
  | "RPM_LIMIT"
  | "RPM_MISSING_TAG"
  | "RPM_SIZE_MISMATCH"
  // A readable package that repodata cannot carry (createrepo_c refuses it too).
  | "RPM_FORBIDDEN_TEXT"
  // Configuration and user input.
  | "CONFIG_INVALID"
  | "USAGE"
  | "NOT_FOUND"
  | "CONFLICT"
  // Storage.
  | "DB_UNREACHABLE"
  | "DB_ERROR"
  | "IO_ERROR"
  // GitHub and upstream.
  | "GITHUB_HTTP"
  | "GITHUB_RATE_LIMITED"
  | "UPSTREAM_MISMATCH"
  | "TIMEOUT"
  | "ABORTED"
  // A sync of one or more remotes did not complete (`sync --now` exits 1 with it).
  | "SYNC_FAILED";

/** An expected failure: a code for machines, a message for a person. */
export class ReposyncError extends Error {
  override readonly name = "ReposyncError";
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** True when `err` is a ReposyncError, optionally with one of `codes`. */
export function isReposyncError(err: unknown, ...codes: ErrorCode[]): err is ReposyncError {
  return err instanceof ReposyncError && (codes.length === 0 || codes.includes(err.code));
}
