import { createHash, randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isReposyncError } from "../../src/errors.js";
import { createGitHubClient } from "../../src/github/client.js";
import { TokenBucket } from "../../src/github/token-bucket.js";
import { redirectTarget } from "../../src/packages/redirect-target.js";
import type { GitHubPackage } from "../../src/packages/upstream.js";
import { FakeClock } from "../github/fake-clock.js";
import { FakeGitHub } from "../support/fake-github.js";

let fake: FakeGitHub;
beforeEach(async () => {
  fake = await FakeGitHub.start();
});
afterEach(async () => {
  await fake.close();
});

function addPackage(content: Uint8Array, isPrivate: boolean): GitHubPackage {
  const name = "tool-2.0-1.noarch.rpm";
  fake.addRepo({ owner: "o", repo: "r", private: isPrivate });
  const { assetIds } = fake.addRelease("o", "r", { tag: "v2", assets: [{ name, content }] });
  const assetId = assetIds[0] ?? 0;
  return {
    sha256: createHash("sha256").update(content).digest("hex"),
    size: content.length,
    assetId,
    name,
    url: `${fake.apiUrl}/repos/o/r/releases/assets/${assetId}`,
    browserDownloadUrl: `${fake.webUrl}/o/r/releases/download/v2/${name}`,
    access: isPrivate ? "api" : "browser",
  };
}

const client = (token?: string, clock?: FakeClock) =>
  createGitHubClient({
    baseUrl: fake.apiUrl,
    bucket: new TokenBucket({ rate: 1000, burst: 100 }),
    ...(token ? { token } : {}),
    ...(clock ? { clock } : {}),
  });

describe("redirectTarget", () => {
  it("sends a public asset's client to its browser download URL, asking GitHub nothing", async () => {
    const pkg = addPackage(randomBytes(100), false);
    expect(await redirectTarget(client(fake.token), pkg)).toBe(pkg.browserDownloadUrl);
    expect(fake.seen).toEqual([]);
  });

  it("resolves a private asset to the signed CDN URL with the token, a URL that works without it", async () => {
    const content = randomBytes(5000);
    const pkg = addPackage(content, true);
    const target = await redirectTarget(client(fake.token), pkg);

    expect(target.startsWith(`${fake.cdnUrl}/`)).toBe(true);
    expect(target).not.toContain(fake.token);
    expect(fake.seen.map((r) => [r.server, r.authorization, r.status])).toEqual([
      ["api", `Bearer ${fake.token}`, 302],
    ]);
    // What the dnf client then does: an anonymous GET of the target.
    const response = await fetch(target);
    expect(Buffer.from(await response.arrayBuffer()).equals(content)).toBe(true);
    expect(fake.counters.cdnAuthRejected).toBe(0);
  });

  it("fails with a GitHub HTTP error when the private asset is asked for without a token", async () => {
    const pkg = addPackage(randomBytes(100), true);
    const err = await redirectTarget(client(), pkg).catch((e: unknown) => e);
    expect(isReposyncError(err, "GITHUB_HTTP")).toBe(true);
  });

  it("retries a 502 from the API per the retry table", async () => {
    const pkg = addPackage(randomBytes(100), true);
    fake.fault({ target: "api", status: 502 });
    const clock = new FakeClock();
    const resolving = redirectTarget(client(fake.token, clock), pkg);
    await clock.sleeping();
    await clock.advance(60_000);
    expect((await resolving).startsWith(`${fake.cdnUrl}/`)).toBe(true);
    expect(fake.seen.map((r) => r.status)).toEqual([502, 302]);
  });
});
