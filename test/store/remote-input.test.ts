import { describe, expect, it } from "vitest";
import { isReposyncError } from "../../src/errors.js";
import { type NewRemote, validateRemote } from "../../src/store/remote-input.js";

const GOOD: NewRemote = {
  name: "acme-tools",
  repo: "acme/tools",
  apiUrl: null,
  tokenEnv: null,
  include: ["*.x86_64.rpm"],
  exclude: ["*-debuginfo-*"],
  prereleases: false,
  intervalMs: 300_000,
  packageMode: "cache",
};

function usageError(input: Partial<NewRemote>): string {
  try {
    validateRemote({ ...GOOD, ...input });
  } catch (err) {
    expect(isReposyncError(err, "USAGE")).toBe(true);
    return (err as Error).message;
  }
  throw new Error("expected a USAGE error");
}

describe("validateRemote", () => {
  it("accepts a good remote and trims a trailing slash from the API URL", () => {
    const r = validateRemote({
      ...GOOD,
      apiUrl: "https://ghe.example.test/api/v3/",
      tokenEnv: "GH_ACME",
    });
    expect(r.apiUrl).toBe("https://ghe.example.test/api/v3");
  });

  it.each(["a", "0", "a.b_c-d", "x".repeat(63)])("accepts the name %j", (name) => {
    expect(validateRemote({ ...GOOD, name }).name).toBe(name);
  });

  it.each(["", "-a", ".a", "A", "a/b", "a b", "x".repeat(64), "é"])(
    "refuses the name %j",
    (name) => {
      expect(usageError({ name })).toContain("remote name");
    },
  );

  it.each(["acme", "acme/", "/tools", "a/b/c", "-acme/tools", "acme/..", "ac me/tools"])(
    "refuses the repository %j",
    (repo) => {
      expect(usageError({ repo })).toContain("repository");
    },
  );

  it.each(["[abc", "*.{rpm", "(x", "", "x86_64/*.rpm", "!*.src.rpm"])(
    "refuses the include glob %j",
    (glob) => {
      expect(usageError({ include: [glob] })).toContain("--include");
    },
  );

  it("names --exclude for a bad exclude glob", () => {
    expect(usageError({ exclude: ["*.{rpm"] })).toContain("--exclude");
  });

  it("refuses an interval below the minimum", () => {
    expect(usageError({ intervalMs: 1000 })).toContain("--interval");
  });

  it("refuses a package mode other than cache or redirect", () => {
    expect(usageError({ packageMode: "mirror" as "cache" })).toContain("--packages");
  });

  it("refuses an API URL that is not http(s)", () => {
    expect(usageError({ apiUrl: "ftp://x" })).toContain("--api-url");
    expect(usageError({ apiUrl: "not a url" })).toContain("--api-url");
  });

  it("refuses a token where the name of its variable belongs, and bad variable names", () => {
    expect(usageError({ tokenEnv: "ghp_abcdefghijklmnopqrstuvwxyz0123456789" })).toContain("NAME");
    expect(usageError({ tokenEnv: "github_pat_11ABC" })).toContain("NAME");
    expect(usageError({ tokenEnv: "MY-TOKEN" })).toContain("--token-env");
    expect(usageError({ tokenEnv: "1TOKEN" })).toContain("--token-env");
  });
});
