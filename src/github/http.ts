import type { TokenBucket } from "./token-bucket.js";

/** Requests actually sent (every attempt and every redirect hop), and body bytes read. */
export interface RequestCounters {
  /** Requests to the API base URL (they spend the credential's rate-limit budget). */
  api: number;
  /** Requests elsewhere: browser download URLs, the CDN. */
  other: number;
  /** Response body bytes consumed by asset reads. */
  bytes: number;
}

/** A fresh set of zeroed counters. */
export function newRequestCounters(): RequestCounters {
  return { api: 0, other: 0, bytes: 0 };
}

/** fetch, plus a per-call timeout override (full downloads need longer than a listing page). */
export type GitHubFetch = (
  input: string | URL,
  init?: RequestInit & { timeoutMs?: number },
) => Promise<Response>;

export interface GitHubFetchOptions {
  readonly bucket: TokenBucket;
  /** Rate-limit budget key of the credential requests to `apiBaseUrl` are made with. */
  readonly budgetKey: string;
  readonly apiBaseUrl: string;
  /** Per-attempt timeout unless the call passes its own. */
  readonly timeoutMs: number;
  readonly counters: RequestCounters;
  readonly fetch?: typeof fetch;
}

/**
 * The only way reposync sends an HTTP request to GitHub. Octokit gets it as `request.fetch` and
 * the asset reader calls it directly, so every real attempt, including each retry the plugins
 * make and each redirect hop we follow by hand, first takes a token from the global bucket.
 *
 * The timeout is armed here, per attempt and after the bucket wait: a request that waited a
 * minute for its token has not been slow, and a retry deserves its own full timeout. It is
 * joined with the caller's signal (`request.signal`), which aborts the wait and the transfer.
 */
export function createGitHubFetch(options: GitHubFetchOptions): GitHubFetch {
  const send = options.fetch ?? globalThis.fetch;
  const apiPrefix = options.apiBaseUrl.replace(/\/+$/, "");
  return async (input, init = {}) => {
    const url = String(input);
    const isApi = url === apiPrefix || url.startsWith(`${apiPrefix}/`);
    const { timeoutMs = options.timeoutMs, signal: callerSignal, ...rest } = init;
    await options.bucket.take({
      ...(isApi ? { key: options.budgetKey } : {}),
      ...(callerSignal ? { signal: callerSignal } : {}),
    });
    if (isApi) options.counters.api++;
    else options.counters.other++;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = callerSignal ? AbortSignal.any([callerSignal, timeout]) : timeout;
    const response = await send(url, { ...rest, signal });
    if (isApi) options.bucket.observe(options.budgetKey, response.headers);
    return response;
  };
}
