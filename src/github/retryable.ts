import { type ErrorCode, ReposyncError } from "../errors.js";

/**
 * What went wrong with one HTTP attempt to GitHub, in the shape the retry table reads: an HTTP
 * status with its headers and message, or no status (the request never got an answer) and a cause.
 */
export interface AttemptFailure {
  readonly status?: number;
  readonly headers?: Readonly<Record<string, string | undefined>>;
  readonly message?: string;
  readonly cause?: unknown;
}

/** Knobs for turning a retryable failure into a delay. */
export interface RetryTiming {
  /** Milliseconds per second of `retry-after` / time-to-reset (1000; tests pass 1). */
  readonly retryAfterUnitMs: number;
  /** First backoff for transient failures; doubled per attempt, capped at `maxBackoffMs`. */
  readonly backoffBaseMs: number;
  readonly maxBackoffMs: number;
  /** Now, epoch milliseconds, for `x-ratelimit-reset`. */
  readonly now: number;
}

export type RetryKind =
  | "secondary-rate-limit"
  | "primary-rate-limit"
  | "retry-after"
  | "too-many-requests"
  | "server-error"
  | "network"
  | "timeout";

/** One row of the retry table. */
export interface RetryCondition {
  readonly kind: RetryKind;
  /** Rate-limit rows spend the rate-limit retry allowance; the others the transient one. */
  readonly rateLimit: boolean;
  /**
   * True where @octokit/plugin-throttling already waits and retries (its own tests: a
   * "secondary rate" message, or `x-ratelimit-remaining: 0`, on a 403/429). The octokit path must
   * not retry those a second time; the raw asset path, which has no plugin, retries every row.
   */
  readonly throttlingRetries: boolean;
  readonly matches: (failure: AttemptFailure) => boolean;
  readonly delayMs: (failure: AttemptFailure, attempt: number, timing: RetryTiming) => number;
}

const isLimitStatus = (f: AttemptFailure) => f.status === 403 || f.status === 429;
const retryAfterSeconds = (f: AttemptFailure): number | null => {
  const raw = f.headers?.["retry-after"];
  const n = raw === undefined ? Number.NaN : Number(raw);
  return Number.isFinite(n) && n >= 0 ? n : null;
};
const backoff = (_f: AttemptFailure, attempt: number, t: RetryTiming) =>
  Math.min(t.maxBackoffMs, t.backoffBaseMs * 2 ** (attempt - 1));
const TRANSIENT_STATUSES = new Set([500, 502, 503, 504]);
const NETWORK_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "EPIPE",
  "ETIMEDOUT",
  "EAI_AGAIN",
  "ENOTFOUND",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "UND_ERR_CLOSED",
]);

function causeChain(err: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let e = err; e !== undefined && e !== null && chain.length < 6; ) {
    chain.push(e);
    e = (e as { cause?: unknown }).cause;
  }
  return chain;
}

/** True when `err` (or one of its causes) is an AbortSignal.timeout firing. */
export function isTimeout(err: unknown): boolean {
  return causeChain(err).some((e) => e instanceof Error && e.name === "TimeoutError");
}

/**
 * THE table of retryable conditions for GitHub (API and CDN). Everything not listed fails at
 * once: 4xx are answers, not accidents, and retrying them only burns budget. Rows are tried in
 * order; the first match decides.
 */
export const RETRYABLE_CONDITIONS: readonly RetryCondition[] = [
  {
    // "You have exceeded a secondary rate limit": wait exactly as long as told (default 60 s).
    kind: "secondary-rate-limit",
    rateLimit: true,
    throttlingRetries: true,
    matches: (f) => isLimitStatus(f) && /\bsecondary rate\b/i.test(f.message ?? ""),
    delayMs: (f, _a, t) => (retryAfterSeconds(f) ?? 60) * t.retryAfterUnitMs,
  },
  {
    // The hourly budget is spent: nothing succeeds before the reset.
    kind: "primary-rate-limit",
    rateLimit: true,
    throttlingRetries: true,
    matches: (f) => isLimitStatus(f) && f.headers?.["x-ratelimit-remaining"] === "0",
    delayMs: (f, _a, t) => {
      const reset = Number(f.headers?.["x-ratelimit-reset"] ?? 0) * 1000;
      return (Math.max(0, Math.ceil((reset - t.now) / 1000)) + 1) * t.retryAfterUnitMs;
    },
  },
  {
    // A 403/429 with retry-after but no message the plugin recognises (some GHES, some CDNs).
    kind: "retry-after",
    rateLimit: true,
    throttlingRetries: false,
    matches: (f) => isLimitStatus(f) && retryAfterSeconds(f) !== null,
    delayMs: (f, _a, t) => (retryAfterSeconds(f) ?? 0) * t.retryAfterUnitMs,
  },
  {
    kind: "too-many-requests",
    rateLimit: true,
    throttlingRetries: false,
    matches: (f) => f.status === 429,
    delayMs: backoff,
  },
  {
    kind: "server-error",
    rateLimit: false,
    throttlingRetries: false,
    matches: (f) => f.status !== undefined && TRANSIENT_STATUSES.has(f.status),
    delayMs: backoff,
  },
  {
    kind: "timeout",
    rateLimit: false,
    throttlingRetries: false,
    matches: (f) => f.headers === undefined && isTimeout(f.cause),
    delayMs: backoff,
  },
  {
    // No answer at all: connection refused or reset, DNS hiccup, socket closed mid-body.
    kind: "network",
    rateLimit: false,
    throttlingRetries: false,
    matches: (f) =>
      f.headers === undefined &&
      causeChain(f.cause).some(
        (e) =>
          (e instanceof TypeError && e.message === "fetch failed") ||
          NETWORK_CODES.has(String((e as { code?: unknown }).code)),
      ),
    delayMs: backoff,
  },
];

/** The row of the table that `failure` matches, if any. */
export function retryConditionFor(failure: AttemptFailure): RetryCondition | undefined {
  return RETRYABLE_CONDITIONS.find((row) => row.matches(failure));
}

/** An HTTP answer from GitHub that was not what we asked for, after any retries. */
export class GitHubHttpError extends ReposyncError {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | undefined>>;
  readonly url: string;

  constructor(
    url: string,
    status: number,
    headers: Readonly<Record<string, string | undefined>>,
    message: string,
    options?: { cause?: unknown; code?: ErrorCode },
  ) {
    super(options?.code ?? codeForStatus(status, headers, message), message, options);
    this.status = status;
    this.headers = headers;
    this.url = url;
  }
}

function codeForStatus(
  status: number,
  headers: Readonly<Record<string, string | undefined>>,
  message: string,
): ErrorCode {
  const row = retryConditionFor({ status, headers, message });
  return row?.rateLimit ? "GITHUB_RATE_LIMITED" : "GITHUB_HTTP";
}

/** The failure as the table sees it, from any error our HTTP paths throw. */
export function failureOf(err: unknown): AttemptFailure {
  if (err instanceof GitHubHttpError) {
    return { status: err.status, headers: err.headers, message: err.message, cause: err };
  }
  const e = err as {
    status?: unknown;
    message?: unknown;
    response?: { headers?: Record<string, string | undefined> };
  };
  // @octokit/request reports "no answer" as status 500 without a response: not a real 500.
  if (e && typeof e === "object" && e.response && typeof e.status === "number") {
    return {
      status: e.status,
      headers: e.response.headers ?? {},
      message: typeof e.message === "string" ? e.message : "",
      cause: err,
    };
  }
  return { cause: err };
}

/** Headers as a plain lower-case record, for errors and the table. */
export function headerRecord(headers: Headers): Record<string, string> {
  return Object.fromEntries(headers.entries());
}
