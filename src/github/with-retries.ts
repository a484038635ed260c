import { ReposyncError } from "../errors.js";
import type { Clock } from "./clock.js";
import {
  failureOf,
  GitHubHttpError,
  isTimeout,
  type RetryCondition,
  type RetryKind,
  retryConditionFor,
} from "./retryable.js";

/** How hard to try again. Defaults suit a background syncer; tests shrink the delays. */
export interface RetryPolicy {
  /** Retries after 5xx, network errors and timeouts (not counting the first attempt). */
  readonly maxTransientRetries: number;
  /** Retries after rate-limit answers (403/429 of any kind). */
  readonly maxRateLimitRetries: number;
  /** A rate-limit wait longer than this fails at once (the scheduler comes back later). */
  readonly maxRateLimitWaitMs: number;
  /** Milliseconds per second of `retry-after`; 1000 in production, 1 in tests. */
  readonly retryAfterUnitMs: number;
  readonly backoffBaseMs: number;
  readonly maxBackoffMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({
  maxTransientRetries: 3,
  maxRateLimitRetries: 3,
  maxRateLimitWaitMs: 15 * 60_000,
  retryAfterUnitMs: 1000,
  backoffBaseMs: 500,
  maxBackoffMs: 30_000,
});

/** Reported before each wait, for logs and metrics. */
export interface RetryEvent {
  readonly kind: RetryKind;
  readonly attempt: number;
  readonly delayMs: number;
  readonly error: unknown;
}

export interface RetryContext {
  readonly clock: Clock;
  readonly policy: RetryPolicy;
  readonly signal?: AbortSignal;
  /** Rows someone else already retries (plugin-throttling on the octokit path). */
  readonly skip?: (row: RetryCondition) => boolean;
  readonly onRetry?: (event: RetryEvent) => void;
}

/**
 * Runs `attempt` until it succeeds, a failure is not in the retry table, or the allowance for its
 * kind is spent; then throws the last error. Rate-limit and transient failures have separate
 * allowances so that a secondary limit followed by a 502 is not one strike too many.
 */
export async function withRetries<T>(
  context: RetryContext,
  attempt: (n: number) => Promise<T>,
): Promise<T> {
  const { clock, policy, signal } = context;
  let transient = 0;
  let limited = 0;
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      if (signal?.aborted) throw err;
      const failure = failureOf(err);
      const row = retryConditionFor(failure);
      if (!row || context.skip?.(row)) throw err;
      const used = row.rateLimit ? ++limited : ++transient;
      const allowed = row.rateLimit ? policy.maxRateLimitRetries : policy.maxTransientRetries;
      if (used > allowed) throw err;
      const delayMs = row.delayMs(failure, used, { ...policy, now: clock.now() });
      if (row.rateLimit && delayMs > policy.maxRateLimitWaitMs) throw err;
      context.onRetry?.({ kind: row.kind, attempt: n, delayMs, error: err });
      await clock.sleep(delayMs, signal);
    }
  }
}

/**
 * The coded error for whatever a GitHub call finally threw: HTTP answers become GitHubHttpError
 * (GITHUB_HTTP, or GITHUB_RATE_LIMITED for limit answers), a fired timeout TIMEOUT, the caller's
 * abort ABORTED, no answer at all GITHUB_HTTP. Errors that already carry a code pass unchanged.
 */
export function toReposyncError(err: unknown, what: string, signal?: AbortSignal): ReposyncError {
  if (err instanceof ReposyncError) return err;
  if (signal?.aborted) return new ReposyncError("ABORTED", `${what}: aborted`, { cause: err });
  const failure = failureOf(err);
  if (failure.status !== undefined && failure.headers !== undefined) {
    const url = (err as { request?: { url?: string } }).request?.url ?? what;
    return new GitHubHttpError(
      url,
      failure.status,
      failure.headers,
      `${what}: HTTP ${failure.status} ${failure.message ?? ""}`.trim(),
      { cause: err },
    );
  }
  if (isTimeout(err)) return new ReposyncError("TIMEOUT", `${what}: timed out`, { cause: err });
  const detail = err instanceof Error ? err.message : String(err);
  return new ReposyncError("GITHUB_HTTP", `${what}: no answer (${detail})`, { cause: err });
}
