import { createHash } from "node:crypto";
import { Octokit } from "@octokit/core";
import { throttling } from "@octokit/plugin-throttling";
import { type Clock, systemClock } from "./clock.js";
import {
  createGitHubFetch,
  type GitHubFetch,
  newRequestCounters,
  type RequestCounters,
} from "./http.js";
import type { TokenBucket } from "./token-bucket.js";
import {
  DEFAULT_RETRY_POLICY,
  type RetryEvent,
  type RetryPolicy,
  toReposyncError,
  withRetries,
} from "./with-retries.js";

/** The REST API version every request asks for. */
export const GITHUB_API_VERSION = "2022-11-28";
export const DEFAULT_API_BASE_URL = "https://api.github.com";

/** Octokit from @octokit/core plus plugin-throttling, and nothing else. */
const ThrottledOctokit = Octokit.plugin(throttling);
export type GitHubOctokit = InstanceType<typeof ThrottledOctokit>;

/** Where the client reports what it does; pino's logger fits. */
export interface GitHubLogger {
  warn(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

export interface GitHubClientOptions {
  /** API base URL; GHES is `https://HOST/api/v3`. Default https://api.github.com. */
  readonly baseUrl?: string;
  /** Token for private repos and the 5000/h budget; absent means anonymous (60/h). */
  readonly token?: string;
  /** The process-wide token bucket. */
  readonly bucket: TokenBucket;
  readonly clock?: Clock;
  /** Per-attempt request timeout (30 s). */
  readonly timeoutMs?: number;
  readonly retry?: Partial<RetryPolicy>;
  readonly userAgent?: string;
  readonly logger?: GitHubLogger;
  /** The fetch underneath the bucket (tests may pass an instrumented one). */
  readonly fetch?: typeof fetch;
}

/** One (API base URL, token): the octokit for JSON calls and the bucketed fetch for downloads. */
export interface GitHubClient {
  readonly baseUrl: string;
  /** Names this credential's rate-limit budget in the bucket; carries no secret. */
  readonly budgetKey: string;
  readonly octokit: GitHubOctokit;
  /** Bucketed, timed fetch for requests octokit cannot make well (streamed, ranged, cross-origin). */
  readonly fetch: GitHubFetch;
  readonly clock: Clock;
  readonly retry: RetryPolicy;
  readonly counters: RequestCounters;
  readonly bucket: TokenBucket;
  readonly logger: GitHubLogger | undefined;
  /** The Authorization header value, or undefined when anonymous. Only for the API origin. */
  authorization(): string | undefined;
}

let clientSequence = 0;

/** A label for a credential that never reveals it: base URL plus a short hash of the token. */
export function budgetKeyFor(baseUrl: string, token: string | undefined): string {
  if (!token) return `${baseUrl} anonymous`;
  return `${baseUrl} token:${createHash("sha256").update(token).digest("hex").slice(0, 8)}`;
}

/** Builds a client; most callers want {@link GitHubClients.get} to share one per credential. */
export function createGitHubClient(options: GitHubClientOptions): GitHubClient {
  const baseUrl = (options.baseUrl ?? DEFAULT_API_BASE_URL).replace(/\/+$/, "");
  const clock = options.clock ?? systemClock;
  const retry: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...options.retry };
  const budgetKey = budgetKeyFor(baseUrl, options.token);
  const counters = newRequestCounters();
  const logger = options.logger;
  const fetch = createGitHubFetch({
    bucket: options.bucket,
    budgetKey,
    apiBaseUrl: baseUrl,
    timeoutMs: options.timeoutMs ?? 30_000,
    counters,
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });

  // plugin-throttling waits after 403/429 (secondary limit: retry-after; primary: until the
  // reset) when these handlers say so. Bounded: a few retries, and never a wait longer than
  // maxRateLimitWaitMs, so a spent hourly budget fails this sync and the scheduler comes back.
  const allowRateLimitRetry =
    (kind: string) =>
    (retryAfter: number, opts: { method?: string; url?: string }, _o: unknown, retryCount = 0) => {
      const wantRetry =
        retryCount < retry.maxRateLimitRetries &&
        retryAfter * retry.retryAfterUnitMs <= retry.maxRateLimitWaitMs;
      logger?.warn(
        { kind, retryAfter, retryCount, wantRetry, method: opts.method, url: opts.url },
        "GitHub rate limit answered",
      );
      return wantRetry;
    };

  const octokit = new ThrottledOctokit({
    baseUrl,
    ...(options.token ? { auth: options.token } : {}),
    userAgent: options.userAgent ?? "reposync",
    request: { fetch },
    log: {
      debug: () => {},
      info: () => {},
      warn: (message: string) => logger?.warn({}, message),
      error: (message: string) => logger?.warn({}, message),
    },
    throttle: {
      // The plugin's Bottleneck groups are module-global and keyed by this id: clients with the
      // same id share one concurrency queue. Each client gets its own, because pacing across
      // clients is the token bucket's job, and a shared key would let one credential's
      // 403-wait hold up requests made with another.
      id: `reposync-${++clientSequence}`,
      retryAfterBaseValue: retry.retryAfterUnitMs,
      onRateLimit: allowRateLimitRetry("primary"),
      onSecondaryRateLimit: allowRateLimitRetry("secondary"),
    },
  });

  octokit.hook.before("request", (req) => {
    req.headers["x-github-api-version"] = GITHUB_API_VERSION;
  });
  // Registered after the plugin, so it wraps it: throttling retries rate limits inside, and
  // this retries what the table calls transient (5xx, no answer, timeout) around it. A 304 is
  // an answer the listing wants to see, so it passes through as octokit's RequestError.
  octokit.hook.wrap("request", async (request, req) => {
    const signal = req.request?.signal ?? undefined;
    try {
      return await withRetries(
        {
          clock,
          policy: retry,
          ...(signal ? { signal } : {}),
          skip: (row) => row.throttlingRetries,
          onRetry: (event: RetryEvent) =>
            logger?.warn(
              { kind: event.kind, attempt: event.attempt, delayMs: event.delayMs, url: req.url },
              "retrying GitHub request",
            ),
        },
        async () => request(req),
      );
    } catch (err) {
      if ((err as { status?: unknown }).status === 304) throw err;
      throw toReposyncError(err, `${req.method} ${req.url}`, signal);
    }
  });

  return {
    baseUrl,
    budgetKey,
    octokit,
    fetch,
    clock,
    retry,
    counters,
    bucket: options.bucket,
    logger,
    authorization: () => (options.token ? `Bearer ${options.token}` : undefined),
  };
}

/**
 * One client per (API base URL, token), created on first use: remotes that share a credential
 * share its octokit, and with it the plugin's per-client queue.
 */
export class GitHubClients {
  private readonly clients = new Map<string, GitHubClient>();

  constructor(private readonly defaults: Omit<GitHubClientOptions, "baseUrl" | "token">) {}

  /** The client for this API base URL and token. */
  get(baseUrl: string | undefined, token: string | undefined): GitHubClient {
    const url = (baseUrl ?? DEFAULT_API_BASE_URL).replace(/\/+$/, "");
    // The full hash, not the short budget label: two tokens must never share a client.
    const key = `${url} ${token ? createHash("sha256").update(token).digest("hex") : ""}`;
    let client = this.clients.get(key);
    if (!client) {
      client = createGitHubClient({
        ...this.defaults,
        baseUrl: url,
        ...(token ? { token } : {}),
      });
      this.clients.set(key, client);
    }
    return client;
  }
}
