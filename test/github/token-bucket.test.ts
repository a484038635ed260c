import { describe, expect, it } from "vitest";
import { TokenBucket } from "../../src/github/token-bucket.js";
import { FakeClock, settle } from "./fake-clock.js";

/** Starts `n` takes at once and records the fake time at which each is granted. */
function startTakes(bucket: TokenBucket, clock: FakeClock, n: number, key?: string) {
  const granted: number[] = [];
  const done = Array.from({ length: n }, () =>
    bucket.take(key === undefined ? {} : { key }).then(() => granted.push(clock.now())),
  );
  return { granted, all: Promise.all(done) };
}

const KEY = "https://api.github.test token:abcd";

describe("TokenBucket", () => {
  it("lets a burst through at once, then one request per 1/rate seconds", async () => {
    const clock = new FakeClock();
    const t0 = clock.now();
    const bucket = new TokenBucket({ rate: 1, burst: 5, clock });
    const { granted, all } = startTakes(bucket, clock, 8);
    await settle();
    expect(granted).toEqual([t0, t0, t0, t0, t0]);
    for (let i = 0; i < 3; i++) await clock.advance(1000);
    await all;
    expect(granted.slice(5)).toEqual([t0 + 1000, t0 + 2000, t0 + 3000]);
  });

  it("never saves up more than the burst while idle", async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ rate: 2, burst: 3, clock });
    await clock.advance(60_000);
    const t = clock.now();
    const { granted, all } = startTakes(bucket, clock, 4);
    await settle();
    expect(granted).toEqual([t, t, t]);
    await clock.advance(500);
    await all;
    expect(granted[3]).toBe(t + 500);
  });

  it("spreads a low remaining budget over the time left until the reset", async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ rate: 1, burst: 5, clock });
    const resetSeconds = Math.floor(clock.now() / 1000) + 100;
    bucket.observe(KEY, {
      "x-ratelimit-remaining": "10",
      "x-ratelimit-reset": String(resetSeconds),
    });
    const start = clock.now();
    const { granted, all } = startTakes(bucket, clock, 3, KEY);
    await settle();
    // ~100 s left for 10 requests: one about every 10 s, though the bucket holds 5 tokens.
    expect(granted).toEqual([start]);
    await clock.advance(5000);
    expect(granted).toHaveLength(1);
    await clock.advance(20_000);
    await all;
    expect(granted[1]! - granted[0]!).toBeGreaterThanOrEqual(9000);
    expect(granted[2]! - granted[1]!).toBeGreaterThanOrEqual(9000);
  });

  it("does not slow down while the budget lasts at the configured rate", async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ rate: 1, burst: 5, clock });
    const reset = Math.floor(clock.now() / 1000) + 3600;
    bucket.observe(KEY, { "x-ratelimit-remaining": "4000", "x-ratelimit-reset": String(reset) });
    const { granted } = startTakes(bucket, clock, 5, KEY);
    await settle();
    expect(granted).toHaveLength(5);
  });

  it("waits for the reset when the remaining budget is zero, for that credential only", async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ rate: 1, burst: 5, clock, resetMarginMs: 1000 });
    const resetAt = clock.now() + 30_000;
    bucket.observe(KEY, {
      "x-ratelimit-limit": "60",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": String(resetAt / 1000),
    });
    const blocked = startTakes(bucket, clock, 1, KEY);
    const cdn = startTakes(bucket, clock, 1);
    await settle();
    expect(cdn.granted).toHaveLength(1);
    expect(blocked.granted).toHaveLength(0);
    await clock.advance(30_000);
    expect(blocked.granted).toHaveLength(0);
    await clock.advance(1000);
    await blocked.all;
    expect(blocked.granted).toEqual([resetAt + 1000]);
  });

  it("copes with responses that carry no rate-limit headers", async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ rate: 1, burst: 2, clock });
    bucket.observe(KEY, new Headers({ "content-type": "application/json" }));
    expect(bucket.budget(KEY)).toBeUndefined();
    const { granted, all } = startTakes(bucket, clock, 3, KEY);
    await settle();
    expect(granted).toHaveLength(2);
    await clock.advance(1000);
    await all;
    expect(granted).toHaveLength(3);
  });

  it("exposes the budget it learned, lowered by each request sent since", async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ rate: 1, burst: 5, clock });
    const reset = Math.floor(clock.now() / 1000) + 3600;
    bucket.observe(
      KEY,
      new Headers({
        "x-ratelimit-limit": "5000",
        "x-ratelimit-remaining": "4999",
        "x-ratelimit-used": "1",
        "x-ratelimit-reset": String(reset),
        "x-ratelimit-resource": "core",
      }),
    );
    await bucket.take({ key: KEY });
    expect(bucket.budgets()).toEqual([
      expect.objectContaining({
        key: KEY,
        limit: 5000,
        remaining: 4998,
        resetAt: reset * 1000,
        resource: "core",
      }),
    ]);
    // GitHub's answer replaces the local estimate (a 304 with a token costs nothing).
    bucket.observe(KEY, { "x-ratelimit-remaining": "4999", "x-ratelimit-reset": String(reset) });
    expect(bucket.budget(KEY)?.remaining).toBe(4999);
  });

  it("stops waiting when the caller aborts", async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ rate: 1, burst: 1, clock });
    await bucket.take();
    const controller = new AbortController();
    const waiting = bucket.take({ signal: controller.signal });
    await settle();
    controller.abort(new Error("stop"));
    await expect(waiting).rejects.toThrow("stop");
    expect(clock.pending).toBe(0);
  });
});
