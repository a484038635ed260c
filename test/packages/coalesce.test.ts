import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isReposyncError } from "../../src/errors.js";
import {
  type Acquire,
  Coalescer,
  type LeaderWork,
  packageKey,
} from "../../src/packages/coalesce.js";
import { ContentStore, type StoredPackage } from "../../src/packages/content-store.js";
import { FakeClock } from "../github/fake-clock.js";
import { Countdown, deferred } from "./deferred.js";

const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** Work whose fetch and recheck each wait for the test, counting their calls. */
function heldWork<T>(missValue: T | undefined = undefined) {
  const recheckGate = deferred<T | undefined>();
  const fetchGate = deferred<T>();
  const rechecks = new Countdown();
  const fetches = new Countdown();
  const signals: AbortSignal[] = [];
  const work: LeaderWork<T> = {
    recheck: () => {
      rechecks.bump();
      return rechecks.count === 1 ? recheckGate.promise : Promise.resolve(missValue);
    },
    fetch: (signal) => {
      fetches.bump();
      signals.push(signal);
      return fetchGate.promise;
    },
  };
  return { work, recheckGate, fetchGate, rechecks, fetches, signals };
}

describe("packageKey", () => {
  it("is the lower-cased digest and the size: one digest in two casings is one key", () => {
    const hex = sha(Buffer.from("a"));
    expect(packageKey({ sha256: hex.toUpperCase(), size: 5 })).toBe(
      packageKey({ sha256: hex, size: 5 }),
    );
    expect(packageKey({ sha256: hex, size: 5 })).not.toBe(packageKey({ sha256: hex, size: 6 }));
    expect(packageKey({ sha256: hex, size: 5 })).not.toBe(
      packageKey({ sha256: sha(Buffer.from("b")), size: 5 }),
    );
    expect(() => packageKey({ sha256: "../x", size: 1 })).toThrow(/not a sha256/);
  });
});

describe("Coalescer", () => {
  it("gives every concurrent caller of one key the leader's single fetch", async () => {
    const waits = new Countdown();
    const c = new Coalescer<string>({ fetchTimeoutMs: 60_000, onCoalescedWait: waits.bump });
    const held = heldWork<string>();
    const runs = Array.from({ length: 8 }, () => c.run("k", held.work));
    await waits.reached(7);
    held.recheckGate.resolve(undefined);
    await held.fetches.reached(1);
    held.fetchGate.resolve("bytes");
    const results = await Promise.all(runs);
    expect(results.map((r) => r.value)).toEqual(Array(8).fill("bytes"));
    expect(results.filter((r) => r.role === "leader")).toHaveLength(1);
    expect(held.fetches.count).toBe(1);
    expect(held.rechecks.count).toBe(1);
    expect(c.inFlight).toBe(0);
  });

  it("never shares between keys", async () => {
    const c = new Coalescer<string>({ fetchTimeoutMs: 60_000 });
    const a = heldWork<string>();
    const b = heldWork<string>();
    const ra = c.run("a", a.work);
    const rb = c.run("b", b.work);
    expect(c.inFlight).toBe(2);
    a.recheckGate.resolve(undefined);
    b.recheckGate.resolve(undefined);
    a.fetchGate.resolve("A");
    b.fetchGate.resolve("B");
    expect(await ra).toEqual({ value: "A", role: "leader" });
    expect(await rb).toEqual({ value: "B", role: "leader" });
    expect(a.fetches.count + b.fetches.count).toBe(2);
  });

  it("detaches the fetch from its leader's signal: the leader leaves, the fetch and its waiters go on", async () => {
    const c = new Coalescer<string>({ fetchTimeoutMs: 60_000 });
    const held = heldWork<string>();
    const leaderClient = new AbortController();
    const leader = c.run("k", held.work, leaderClient.signal);
    const waiter = c.run("k", held.work);
    held.recheckGate.resolve(undefined);
    await held.fetches.reached(1);
    leaderClient.abort();
    const err = await leader.catch((e) => e);
    expect((err as Error).name).toBe("AbortError");
    expect(held.signals[0]?.aborted).toBe(false);
    held.fetchGate.resolve("bytes");
    expect(await waiter).toEqual({ value: "bytes", role: "waiter" });
  });

  it("lets a waiter leave on its own signal without touching the others", async () => {
    const c = new Coalescer<string>({ fetchTimeoutMs: 60_000 });
    const held = heldWork<string>();
    const leaving = new AbortController();
    const leader = c.run("k", held.work);
    const staying = c.run("k", held.work);
    const leaver = c.run("k", held.work, leaving.signal);
    held.recheckGate.resolve(undefined);
    await held.fetches.reached(1);
    leaving.abort();
    expect(((await leaver.catch((e) => e)) as Error).name).toBe("AbortError");
    expect(held.signals[0]?.aborted).toBe(false);
    held.fetchGate.resolve("bytes");
    expect((await leader).value).toBe("bytes");
    expect((await staying).value).toBe("bytes");
  });

  it("refuses a caller whose signal is already aborted, starting nothing", async () => {
    const c = new Coalescer<string>({ fetchTimeoutMs: 60_000 });
    const held = heldWork<string>();
    const err = await c.run("k", held.work, AbortSignal.abort()).catch((e) => e);
    expect((err as Error).name).toBe("AbortError");
    expect(held.rechecks.count).toBe(0);
    expect(c.inFlight).toBe(0);
  });

  it.each([
    ["rejects", (boom: unknown) => () => Promise.reject(boom)],
    [
      "throws synchronously",
      (boom: unknown) => () => {
        throw boom;
      },
    ],
  ])(
    "when the fetch %s, every waiter gets the error and the key is freed for a retry",
    async (_how, failing) => {
      const c = new Coalescer<string>({ fetchTimeoutMs: 60_000 });
      const boom = new Error("upstream said no");
      const recheckGate = deferred<string | undefined>();
      let fetches = 0;
      const work: LeaderWork<string> = {
        recheck: () => recheckGate.promise,
        fetch: () => {
          fetches++;
          return failing(boom)() as Promise<string>;
        },
      };
      const runs = Array.from({ length: 4 }, () => c.run("k", work).catch((e: unknown) => e));
      recheckGate.resolve(undefined);
      const errors = await Promise.all(runs);
      expect(errors).toEqual(Array(4).fill(boom));
      expect(fetches).toBe(1);
      expect(c.inFlight).toBe(0);

      const retry = await c.run("k", {
        recheck: async () => undefined,
        fetch: async () => {
          fetches++;
          return "second time lucky";
        },
      });
      expect(retry).toEqual({ value: "second time lucky", role: "leader" });
      expect(fetches).toBe(2);
    },
  );

  it("turns a thrown non-Error into an Error for every waiter, and frees the key", async () => {
    const c = new Coalescer<string>({ fetchTimeoutMs: 60_000 });
    const gate = deferred<string | undefined>();
    const work: LeaderWork<string> = {
      recheck: () => gate.promise,
      fetch: () => {
        throw "a string, not an Error";
      },
    };
    const runs = [c.run("k", work), c.run("k", work)].map((r) => r.catch((e: unknown) => e));
    gate.resolve(undefined);
    for (const err of await Promise.all(runs)) {
      expect(err).toBeInstanceOf(Error);
      expect((err as Error).message).toContain("a string, not an Error");
    }
    expect(c.inFlight).toBe(0);
  });

  it("frees the key when the recheck itself throws synchronously", async () => {
    const c = new Coalescer<string>({ fetchTimeoutMs: 60_000 });
    const boom = new Error("stat exploded");
    const err = await c
      .run("k", {
        recheck: () => {
          throw boom;
        },
        fetch: async () => "never",
      })
      .catch((e) => e);
    expect(err).toBe(boom);
    expect(c.inFlight).toBe(0);
  });

  it("bounds the shared fetch by its own timeout: every waiter gets TIMEOUT and the key is freed", async () => {
    const clock = new FakeClock();
    const c = new Coalescer<string>({ fetchTimeoutMs: 30_000, clock });
    const held = heldWork<string>();
    const runs = [c.run("k", held.work), c.run("k", held.work)].map((r) =>
      r.catch((e: unknown) => e),
    );
    held.recheckGate.resolve(undefined);
    await held.fetches.reached(1);
    // The held fetch ignores its signal: the timeout must free the waiters anyway.
    const signal = held.signals[0];
    await clock.advance(29_999);
    expect(signal?.aborted).toBe(false);
    await clock.advance(1);
    for (const err of await Promise.all(runs)) expect(isReposyncError(err, "TIMEOUT")).toBe(true);
    expect(c.inFlight).toBe(0);
  });

  it("abortAll stops the fetches in flight with ABORTED for their waiters", async () => {
    const c = new Coalescer<string>({ fetchTimeoutMs: 60_000 });
    const held = heldWork<string>();
    const run = c.run("k", held.work).catch((e: unknown) => e);
    held.recheckGate.resolve(undefined);
    await held.fetches.reached(1);
    // This fetch honours its signal, as a download does: settled() waits for it to return.
    const signal = held.signals[0];
    signal?.addEventListener("abort", () => held.fetchGate.reject(signal.reason));
    c.abortAll("stopping");
    expect(signal?.aborted).toBe(true);
    expect(isReposyncError(await run, "ABORTED")).toBe(true);
    await c.settled();
    expect(c.inFlight).toBe(0);
  });

  it("runs the pluggable acquire step between the recheck and the fetch", async () => {
    const steps: string[] = [];
    const acquire: Acquire<string> = async (ctx) => {
      steps.push(`lease ${ctx.key}`);
      try {
        return await ctx.fetch(ctx.signal);
      } finally {
        steps.push("release");
      }
    };
    const c = new Coalescer<string>({ fetchTimeoutMs: 60_000, acquire });
    const result = await c.run("k", {
      recheck: async () => {
        steps.push("recheck");
        return undefined;
      },
      fetch: async () => {
        steps.push("fetch");
        return "v";
      },
    });
    expect(result.value).toBe("v");
    expect(steps).toEqual(["recheck", "lease k", "fetch", "release"]);
  });
});

describe("Coalescer with a real store: the leader's recheck", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "reposync-coalesce-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("serves a put that committed between a caller's miss check and its leadership without a second download", async () => {
    const store = new ContentStore({ root: dir });
    const bytes = randomBytes(50_000);
    const hex = sha(bytes);
    const c = new Coalescer<StoredPackage>({ fetchTimeoutMs: 60_000 });
    const commit = deferred();
    let downloads = 0;
    const work: LeaderWork<StoredPackage> = {
      recheck: () => store.open(hex),
      fetch: async (signal) => {
        downloads++;
        await commit.promise;
        return store.put(hex, bytes.length, Readable.from([bytes]), signal);
      },
    };

    // The first caller misses and leads a download, held before it commits.
    expect(await store.open(hex)).toBeUndefined();
    const first = c.run(packageKey({ sha256: hex, size: bytes.length }), work);
    // The second caller checks the store now: still a miss...
    expect(await store.open(hex)).toBeUndefined();
    // ...then the first download commits and its flight leaves the map...
    commit.resolve();
    expect((await first).role).toBe("leader");
    expect(c.inFlight).toBe(0);
    // ...and the second caller, arriving only now, leads: its recheck finds the file.
    const second = await c.run(packageKey({ sha256: hex, size: bytes.length }), work);
    expect(second.role).toBe("leader");
    expect(second.value.path).toBe(store.pathFor(hex));
    expect(await readFile(second.value.path)).toEqual(bytes);
    expect(downloads).toBe(1);
  });
});
