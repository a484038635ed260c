import { describe, expect, it } from "vitest";
import { remoteTokenResolver } from "../../src/config/remote-token.js";

describe("the token of a remote", () => {
  const env = { GITHUB_TOKEN_ACME: "acme-token", EMPTY: "" };
  const tokenFor = remoteTokenResolver("default-token", env);

  it("is GITHUB_TOKEN when the remote names no variable", () => {
    expect(tokenFor({ tokenEnv: null })).toBe("default-token");
  });

  it("is the named variable's value, and anonymous when that is unset or empty", () => {
    expect(tokenFor({ tokenEnv: "GITHUB_TOKEN_ACME" })).toBe("acme-token");
    expect(tokenFor({ tokenEnv: "MISSING" })).toBeUndefined();
    expect(tokenFor({ tokenEnv: "EMPTY" })).toBeUndefined();
  });
});
