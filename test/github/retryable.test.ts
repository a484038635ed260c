import { describe, expect, it } from "vitest";
import { budgetKeyFor, GitHubClients } from "../../src/github/client.js";
import { failureOf, retryConditionFor } from "../../src/github/retryable.js";
import { TokenBucket } from "../../src/github/token-bucket.js";

const timing = { retryAfterUnitMs: 1000, backoffBaseMs: 500, maxBackoffMs: 30_000, now: 1_000_000 };

describe("the retry table", () => {
  it("classifies answers and non-answers into one row each, or none", () => {
    const kind = (f: Parameters<typeof retryConditionFor>[0]) => retryConditionFor(f)?.kind;
    expect(kind({ status: 502, headers: {} })).toBe("server-error");
    expect(kind({ status: 503, headers: {} })).toBe("server-error");
    expect(kind({ status: 501, headers: {} })).toBeUndefined();
    expect(kind({ status: 404, headers: {} })).toBeUndefined();
    expect(kind({ status: 403, headers: {}, message: "Resource not accessible" })).toBeUndefined();
    expect(
      kind({ status: 403, headers: {}, message: "You have exceeded a secondary rate limit" }),
    ).toBe("secondary-rate-limit");
    expect(kind({ status: 403, headers: { "x-ratelimit-remaining": "0" } })).toBe(
      "primary-rate-limit",
    );
    expect(kind({ status: 429, headers: { "retry-after": "3" } })).toBe("retry-after");
    expect(kind({ status: 429, headers: {} })).toBe("too-many-requests");
    const network = new TypeError("fetch failed", {
      cause: Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }),
    });
    expect(kind({ cause: network })).toBe("network");
    expect(kind({ cause: new DOMException("timed out", "TimeoutError") })).toBe("timeout");
    expect(kind({ cause: new Error("a bug") })).toBeUndefined();
  });

  it("marks the rows plugin-throttling already retries, so octokit calls are not retried twice", () => {
    const throttled = (f: Parameters<typeof retryConditionFor>[0]) =>
      retryConditionFor(f)?.throttlingRetries;
    expect(throttled({ status: 403, headers: {}, message: "secondary rate limit" })).toBe(true);
    expect(throttled({ status: 429, headers: { "x-ratelimit-remaining": "0" } })).toBe(true);
    expect(throttled({ status: 429, headers: { "retry-after": "1" } })).toBe(false);
    expect(throttled({ status: 502, headers: {} })).toBe(false);
  });

  it("waits as long as GitHub says: retry-after, or until the reset", () => {
    const delay = (f: Parameters<typeof retryConditionFor>[0], attempt = 1) =>
      retryConditionFor(f)?.delayMs(f, attempt, timing);
    expect(delay({ status: 403, headers: { "retry-after": "7" }, message: "secondary rate" })).toBe(
      7000,
    );
    expect(delay({ status: 403, headers: {}, message: "secondary rate" })).toBe(60_000);
    expect(
      delay({
        status: 403,
        headers: { "x-ratelimit-remaining": "0", "x-ratelimit-reset": "1010" },
      }),
    ).toBe(11_000);
    expect(delay({ status: 502, headers: {} }, 1)).toBe(500);
    expect(delay({ status: 502, headers: {} }, 3)).toBe(2000);
    expect(delay({ status: 502, headers: {} }, 30)).toBe(30_000);
  });

  it("does not mistake octokit's status 500 for a missing answer for a real 500", () => {
    const noAnswer = Object.assign(new Error("connect ECONNREFUSED"), {
      status: 500,
      cause: new TypeError("fetch failed"),
    });
    expect(failureOf(noAnswer).status).toBeUndefined();
    expect(retryConditionFor(failureOf(noAnswer))?.kind).toBe("network");
  });
});

describe("GitHubClients", () => {
  it("shares one client per API URL and token, and never puts the token in the budget key", () => {
    const clients = new GitHubClients({ bucket: new TokenBucket({ rate: 1, burst: 5 }) });
    const a = clients.get("http://127.0.0.1:1/api/v3/", "secret-a");
    expect(clients.get("http://127.0.0.1:1/api/v3", "secret-a")).toBe(a);
    expect(clients.get("http://127.0.0.1:1/api/v3", "secret-b")).not.toBe(a);
    expect(clients.get("http://127.0.0.1:1/api/v3", undefined)).not.toBe(a);
    expect(a.budgetKey).not.toContain("secret");
    expect(budgetKeyFor("x", "secret-a")).not.toBe(budgetKeyFor("x", "secret-b"));
  });
});
