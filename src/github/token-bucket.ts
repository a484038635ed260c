import { type Clock, systemClock } from "./clock.js";

/**
 * The one global token bucket every HTTP request to GitHub takes a token from first: listing
 * pages, ranged asset reads, full downloads, redirect hops and retries alike.
 *
 * Why hand-written and not bottleneck's reservoir: bottleneck reads Date.now() and arms its own
 * setTimeout/setInterval, so a test of "5 at once, then one per second, then nothing until the
 * reset" would have to sleep for real. The project rule "time is injected" wins over "prefer a
 * library" here; a bucket is thirty lines, and the GitHub budget logic below has no library
 * equivalent anyway (plugin-throttling only reacts after a 403/429).
 *
 * Two limits apply to each take:
 * - the bucket itself: `rate` tokens per second, at most `burst` saved up (defaults 1/s, 5);
 * - the GitHub budget of the credential the request is made with (`key`), learned from the
 *   `x-ratelimit-*` headers of its responses. While the budget would last until the reset at our
 *   own rate, it changes nothing. When it runs low, requests on that key are spread evenly over
 *   the time left (remaining requests / time to reset), so a nearly spent hourly budget is not
 *   burnt in a burst followed by an hour of 403s. At zero, that key waits for the reset (plus a
 *   margin: GitHub says to retry after it, not at it). Responses without these headers (the CDN,
 *   some GHES) leave the budget unknown, and only the bucket applies.
 * Budgets are per key (API base URL + token) because each token has its own hourly allowance;
 * one exhausted token must not stall remotes that use another.
 */
export interface TokenBucketOptions {
  /** Tokens per second (GITHUB_SYNC_RATE). */
  readonly rate: number;
  /** Most tokens saved up while idle (GITHUB_SYNC_BURST). */
  readonly burst: number;
  readonly clock?: Clock;
  /** Extra wait after `x-ratelimit-reset` before spending from a budget that was at zero. */
  readonly resetMarginMs?: number;
}

/** What GitHub last told us about one credential's primary rate limit. */
export interface RateLimitBudget {
  readonly key: string;
  readonly limit: number | null;
  /** Requests left in the window (lowered locally for each request sent since). */
  readonly remaining: number;
  readonly used: number | null;
  /** When the window resets, epoch milliseconds. */
  readonly resetAt: number;
  readonly resource: string | null;
  /** When the headers were seen, epoch milliseconds. */
  readonly observedAt: number;
}

/** Anything that can look up a response header by (lower-case) name. */
export type HeaderSource = Headers | Readonly<Record<string, string | number | undefined>>;

interface BudgetState {
  limit: number | null;
  remaining: number;
  used: number | null;
  resetAt: number;
  resource: string | null;
  observedAt: number;
  lastTakeAt: number;
}

function header(source: HeaderSource, name: string): string | undefined {
  if (source instanceof Headers) return source.get(name) ?? undefined;
  const value = source[name];
  return value === undefined ? undefined : String(value);
}

function intHeader(source: HeaderSource, name: string): number | null {
  const raw = header(source, name);
  if (raw === undefined || raw.trim() === "") return null;
  const n = Number(raw);
  return Number.isFinite(n) ? Math.trunc(n) : null;
}

/** See the file comment. */
export class TokenBucket {
  readonly rate: number;
  readonly burst: number;
  private readonly clock: Clock;
  private readonly resetMarginMs: number;
  private tokens: number;
  private refilledAt: number;
  private readonly budgetsByKey = new Map<string, BudgetState>();

  constructor(options: TokenBucketOptions) {
    if (!(options.rate > 0))
      throw new RangeError(`token bucket rate must be > 0, got ${options.rate}`);
    if (!(options.burst >= 1)) {
      throw new RangeError(`token bucket burst must be >= 1, got ${options.burst}`);
    }
    this.rate = options.rate;
    this.burst = options.burst;
    this.clock = options.clock ?? systemClock;
    this.resetMarginMs = options.resetMarginMs ?? 1000;
    this.tokens = options.burst;
    this.refilledAt = this.clock.now();
  }

  /**
   * Waits until a request may be sent, then spends one token (and one unit of `key`'s budget).
   * Rejects with the signal's reason when `signal` aborts while waiting.
   */
  async take(options: { key?: string; signal?: AbortSignal } = {}): Promise<void> {
    const { key, signal } = options;
    for (;;) {
      signal?.throwIfAborted();
      const now = this.clock.now();
      const wait = this.delay(key, now);
      if (wait <= 0) {
        this.tokens -= 1;
        const budget = key === undefined ? undefined : this.budgetsByKey.get(key);
        if (budget) {
          budget.lastTakeAt = now;
          if (now < budget.resetAt) budget.remaining = Math.max(0, budget.remaining - 1);
        }
        return;
      }
      // Several waiters may wake together; the loop lets one win and the rest wait again.
      await this.clock.sleep(wait, signal);
    }
  }

  /** Milliseconds until a take on `key` would succeed now (0: at once). */
  delay(key?: string, now = this.clock.now()): number {
    this.refill(now);
    const tokenWait = this.tokens >= 1 ? 0 : Math.ceil(((1 - this.tokens) / this.rate) * 1000);
    return Math.max(tokenWait, key === undefined ? 0 : this.budgetDelay(key, now));
  }

  /** Records the `x-ratelimit-*` headers of a response made with `key`; absent headers change nothing. */
  observe(key: string, headers: HeaderSource): void {
    const remaining = intHeader(headers, "x-ratelimit-remaining");
    const reset = intHeader(headers, "x-ratelimit-reset");
    if (remaining === null || reset === null) return;
    const resetAt = reset * 1000;
    const previous = this.budgetsByKey.get(key);
    // GitHub's count replaces our estimate (lowered by one per request sent): requests that
    // cost nothing, such as a 304 to an authenticated conditional request, must not stay
    // counted. Out-of-order answers of concurrent requests make it briefly high; harmless.
    this.budgetsByKey.set(key, {
      limit: intHeader(headers, "x-ratelimit-limit"),
      remaining,
      used: intHeader(headers, "x-ratelimit-used"),
      resetAt,
      resource: header(headers, "x-ratelimit-resource") ?? null,
      observedAt: this.clock.now(),
      lastTakeAt: previous?.lastTakeAt ?? Number.NEGATIVE_INFINITY,
    });
  }

  /** The budget last seen for `key`, for status and metrics. */
  budget(key: string): RateLimitBudget | undefined {
    const state = this.budgetsByKey.get(key);
    return state && { key, ...withoutLastTake(state) };
  }

  /** Every known budget, for status and metrics. */
  budgets(): RateLimitBudget[] {
    return [...this.budgetsByKey.entries()].map(([key, state]) => ({
      key,
      ...withoutLastTake(state),
    }));
  }

  private refill(now: number): void {
    const elapsed = Math.max(0, now - this.refilledAt);
    this.tokens = Math.min(this.burst, this.tokens + (elapsed / 1000) * this.rate);
    this.refilledAt = now;
  }

  private budgetDelay(key: string, now: number): number {
    const budget = this.budgetsByKey.get(key);
    // Unknown, or the window has reset since: nothing to hold back for.
    if (!budget || now >= budget.resetAt + this.resetMarginMs) return 0;
    if (budget.remaining <= 0) return budget.resetAt + this.resetMarginMs - now;
    if (now >= budget.resetAt) return 0;
    const spacing = (budget.resetAt - now) / budget.remaining;
    if (spacing <= 1000 / this.rate) return 0;
    return Math.ceil(budget.lastTakeAt + spacing - now);
  }
}

function withoutLastTake(state: BudgetState): Omit<RateLimitBudget, "key"> {
  const { lastTakeAt: _ignored, ...rest } = state;
  return rest;
}
