import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isReposyncError } from "../../src/errors.js";
import { ContentStore, normaliseSha256 } from "../../src/packages/content-store.js";
import { Countdown } from "./deferred.js";

const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

let dir: string;
let store: ContentStore;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "reposync-store-"));
  store = new ContentStore({ root: path.join(dir, "packages") });
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Every file under the store, relative to its root. */
async function filesInStore(): Promise<string[]> {
  const entries = await readdir(store.root, { recursive: true, withFileTypes: true }).catch(
    () => [],
  );
  return entries
    .filter((e) => e.isFile())
    .map((e) => path.relative(store.root, path.join(e.parentPath, e.name)))
    .sort();
}

function webStream(chunks: Uint8Array[], onCancel?: () => void): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      const chunk = chunks[i++];
      if (chunk) controller.enqueue(chunk);
      else controller.close();
    },
    cancel: () => onCancel?.(),
  });
}

describe("ContentStore", () => {
  it("stores verified bytes under sha256/<first two hex>/<hex> and leaves no temporary file", async () => {
    const bytes = randomBytes(100_000);
    const hex = sha(bytes);
    const stored = await store.put(
      hex,
      bytes.length,
      webStream([bytes.subarray(0, 7), bytes.subarray(7)]),
    );
    expect(stored).toEqual({
      sha256: hex,
      size: bytes.length,
      path: path.join(store.root, "sha256", hex.slice(0, 2), hex),
    });
    expect(await readFile(stored.path)).toEqual(bytes);
    expect(await filesInStore()).toEqual([path.join("sha256", hex.slice(0, 2), hex)]);
    expect(await store.has(hex)).toBe(true);
    expect(await store.open(hex)).toEqual(stored);
  });

  it("accepts any async iterable (a node stream) and an upper-case digest, storing it lower-case", async () => {
    const bytes = randomBytes(40_000);
    const hex = sha(bytes);
    const stored = await store.put(hex.toUpperCase(), bytes.length, Readable.from([bytes]));
    expect(stored.sha256).toBe(hex);
    expect(await readFile(store.pathFor(hex))).toEqual(bytes);
    expect(await store.open(hex.toUpperCase())).toEqual(stored);
  });

  it("answers a miss with undefined and has() false", async () => {
    const hex = sha(Buffer.from("absent"));
    expect(await store.open(hex)).toBeUndefined();
    expect(await store.has(hex)).toBe(false);
  });

  it("refuses bytes with another digest: UPSTREAM_MISMATCH, nothing stored, no temporary file", async () => {
    const bytes = randomBytes(5000);
    const wrong = Buffer.from(bytes);
    wrong[100] = (wrong[100] ?? 0) ^ 0xff;
    const err = await store.put(sha(bytes), bytes.length, Readable.from([wrong])).catch((e) => e);
    expect(isReposyncError(err, "UPSTREAM_MISMATCH")).toBe(true);
    expect(await store.has(sha(bytes))).toBe(false);
    expect(await filesInStore()).toEqual([]);
  });

  it("refuses too few bytes, even when what came hashes right for its length", async () => {
    const bytes = randomBytes(5000);
    const err = await store
      .put(sha(bytes), bytes.length + 1, Readable.from([bytes]))
      .catch((e) => e);
    expect(isReposyncError(err, "UPSTREAM_MISMATCH")).toBe(true);
    expect(await filesInStore()).toEqual([]);
  });

  it("stops reading a source longer than the size, and cancels a web stream it stops early", async () => {
    const bytes = randomBytes(1000);
    async function* endless() {
      for (;;) yield bytes;
    }
    const err = await store.put(sha(bytes), bytes.length, endless()).catch((e) => e);
    expect(isReposyncError(err, "UPSTREAM_MISMATCH")).toBe(true);

    let cancelled = false;
    const stream = webStream([bytes, bytes, bytes], () => {
      cancelled = true;
    });
    const err2 = await store.put(sha(bytes), bytes.length, stream).catch((e) => e);
    expect(isReposyncError(err2, "UPSTREAM_MISMATCH")).toBe(true);
    expect(cancelled).toBe(true);
    expect(await filesInStore()).toEqual([]);
  });

  it("passes a failing source's error on and removes its temporary file", async () => {
    const bytes = randomBytes(3000);
    const boom = new Error("connection reset");
    async function* failing() {
      yield bytes.subarray(0, 1000);
      throw boom;
    }
    await expect(store.put(sha(bytes), bytes.length, failing())).rejects.toBe(boom);
    expect(await filesInStore()).toEqual([]);
  });

  it("stops when its signal aborts, leaving nothing", async () => {
    const bytes = randomBytes(3000);
    const controller = new AbortController();
    async function* aborting() {
      yield bytes.subarray(0, 1000);
      controller.abort();
      yield bytes.subarray(1000);
    }
    const err = await store
      .put(sha(bytes), bytes.length, aborting(), controller.signal)
      .catch((e) => e);
    expect((err as Error).name).toBe("AbortError");
    expect(await filesInStore()).toEqual([]);
  });

  it("lets two concurrent puts of one digest both succeed, leaving one whole file", async () => {
    const bytes = randomBytes(200_000);
    const hex = sha(bytes);
    const half = bytes.length / 2;
    // Neither writer gets its second chunk before both have their first: both temporary
    // files exist at once, and both renames target the same name.
    const firstChunks = new Countdown();
    const gated = () => {
      let i = 0;
      return new ReadableStream<Uint8Array>({
        async pull(controller) {
          i++;
          if (i === 1) {
            controller.enqueue(bytes.subarray(0, half));
            firstChunks.bump();
          } else if (i === 2) {
            await firstChunks.reached(2);
            controller.enqueue(bytes.subarray(half));
          } else controller.close();
        },
      });
    };
    const [a, b] = await Promise.all([
      store.put(hex, bytes.length, gated()),
      store.put(hex, bytes.length, gated()),
    ]);
    expect(a).toEqual(b);
    expect(await readFile(a.path)).toEqual(bytes);
    expect(await filesInStore()).toEqual([path.join("sha256", hex.slice(0, 2), hex)]);
  });

  it("refuses anything but 64 hex digits, so no digest can name a path outside the store", async () => {
    const good = sha(Buffer.from("x"));
    const bad = [
      "",
      "../../../../etc/passwd",
      `../${good.slice(3)}`,
      `${good.slice(0, 2)}/../${good.slice(5)}`,
      good.slice(1),
      `${good}0`,
      `${good.slice(1)}g`,
      `${good.slice(1)}/`,
      ` ${good.slice(1)}`,
      `${good.slice(2)}\0\0`,
    ];
    for (const digest of bad) {
      expect(() => normaliseSha256(digest), digest).toThrow(/not a sha256/);
      expect(() => store.pathFor(digest)).toThrow(/not a sha256/);
      const errs = await Promise.all([
        store.open(digest).catch((e) => e),
        store.has(digest).catch((e) => e),
        store.put(digest, 1, Readable.from([Buffer.from("x")])).catch((e) => e),
      ]);
      for (const err of errs) expect(isReposyncError(err, "USAGE"), digest).toBe(true);
    }
    expect(await readdir(dir)).toEqual([]);
  });

  it("removes stale temporary files at startup and keeps fresh ones and stored packages", async () => {
    const now = Date.now();
    const aged = new ContentStore({ root: store.root, staleTempMs: 60_000, now: () => now });
    const bytes = randomBytes(100);
    const stored = await aged.put(sha(bytes), bytes.length, Readable.from([bytes]));
    const folder = path.dirname(stored.path);
    const stale = path.join(folder, `.tmp-${sha(bytes)}-1-aaaaaa`);
    const fresh = path.join(folder, `.tmp-${sha(bytes)}-2-bbbbbb`);
    await writeFile(stale, "half a download");
    await writeFile(fresh, "a download in progress elsewhere");
    const old = new Date(now - 61_000);
    await utimes(stale, old, old);

    expect(await aged.removeStaleTemps()).toBe(1);
    const names = (await readdir(folder)).sort();
    expect(names).toEqual([path.basename(fresh), path.basename(stored.path)].sort());
  });

  it("lives under <dataDir>/packages for a data directory", () => {
    const hex = sha(Buffer.from("d"));
    expect(ContentStore.inDataDir(dir).pathFor(hex)).toBe(
      path.join(dir, "packages", "sha256", hex.slice(0, 2), hex),
    );
  });

  it("has nothing to clean in a store that does not exist yet", async () => {
    expect(await store.removeStaleTemps()).toBe(0);
  });
});
