import { randomBytes } from "node:crypto";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterEach, expect, it } from "vitest";
import { createGitHubClient } from "../../src/github/client.js";
import { TokenBucket } from "../../src/github/token-bucket.js";
import type { PackageBytes } from "../../src/packages/content-store.js";
import { createGitHubUpstream } from "../../src/packages/upstream.js";
import { packageAt } from "./fetch-lease-harness.js";
import { HeldUpstream } from "./held-upstream.js";

// A full collection on demand, so the test does not depend on when V8 would collect by itself.
setFlagsFromString("--expose-gc");
const collect = runInNewContext("gc") as () => void;

let upstream: HeldUpstream | undefined;
afterEach(async () => {
  await upstream?.close();
});

async function readAll(bytes: PackageBytes): Promise<number> {
  let n = 0;
  for await (const chunk of bytes as AsyncIterable<Uint8Array>) n += chunk.length;
  return n;
}

it("keeps the downloaded body readable when a garbage collection runs before the store reads it", async () => {
  const content = randomBytes(256 * 1024);
  upstream = await HeldUpstream.start(content);
  upstream.release();
  const client = createGitHubClient({
    baseUrl: "http://127.0.0.1:9/api/v3",
    bucket: new TokenBucket({ rate: 1000, burst: 100 }),
    retry: { maxTransientRetries: 0 },
  });
  const fetchUpstream = createGitHubUpstream({ clientFor: () => client });
  const bytes = await fetchUpstream(packageAt(upstream.url, content), new AbortController().signal);
  // What the store does before it takes a reader (its folder, its temporary file) gives V8 room
  // to collect the Response and run finalizers; force both here.
  for (let i = 0; i < 5; i++) {
    collect();
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  expect(await readAll(bytes)).toBe(content.length);
});
