import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isReposyncError } from "../../src/errors.js";
import { ContentStore, type StoredPackage } from "../../src/packages/content-store.js";
import { FetchLeases, fetchLeasesFor } from "../../src/packages/fetch-lease.js";
import type { FetchUpstream } from "../../src/packages/package-cache.js";
import type { GitHubPackage } from "../../src/packages/upstream.js";
import { acquireFetchLease, readFetchLease } from "../../src/store/fetch-lease.js";
import { migrate } from "../../src/store/migrate.js";
import { openDatabase } from "../../src/store/open-database.js";
import { type Database, sql } from "../../src/store/port.js";
import { FakeClock } from "../github/fake-clock.js";
import { createTestSchema, havePostgres, type TestSchema } from "../support/postgres.js";
import { type Deferred, deferred } from "./deferred.js";
import {
  CountingDatabase,
  leaseRows,
  packageAt,
  type Replica,
  realUpstream,
  replica,
} from "./fetch-lease-harness.js";
import { HeldUpstream } from "./held-upstream.js";

const PG = await havePostgres();

let dir: string;
let upstreams: HeldUpstream[];
let cleanups: (() => Promise<void>)[];

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "reposync-lease-"));
  upstreams = [];
  cleanups = [];
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await Promise.all(upstreams.map((u) => u.close()));
  await rm(dir, { recursive: true, force: true });
});

async function startUpstream(bytes: Uint8Array): Promise<HeldUpstream> {
  const upstream = await HeldUpstream.start(bytes);
  upstreams.push(upstream);
  return upstream;
}

/** The shared content store folder of every replica (each gets its own ContentStore on it). */
const sharedStore = () => new ContentStore({ root: path.join(dir, "packages") });

/**
 * `size` random bytes as a package (asset `assetId`, packageAt's own by default), behind an
 * upstream that holds every download until the test releases it.
 */
async function heldPackage(size: number, assetId?: number) {
  const bytes = randomBytes(size);
  const upstream = await startUpstream(bytes);
  return { bytes, upstream, pkg: packageAt(upstream.url, bytes, assetId) };
}

/** The fetch_leases key a package's download is leased under. */
const leaseKey = (pkg: GitHubPackage) => `package:${pkg.sha256}:${pkg.size}`;

describe("SQLite never uses fetch leases", () => {
  it("gets no fetch leases, refuses to build them, and a miss there sends no lease statement", async () => {
    const db = await openDatabase(path.join(dir, "reposync.db"));
    cleanups.push(() => db.close());
    await migrate(db);
    expect(fetchLeasesFor({ db, owner: "x" })).toBeUndefined();
    expect(() => new FetchLeases({ db, owner: "x" })).toThrow(/Postgres/);

    const { bytes, upstream, pkg } = await heldPackage(4096);
    upstream.release();
    const r = replica({ name: "solo", db, store: sharedStore() });
    expect(r.leases).toBeUndefined();
    const stored = await r.cache.get(pkg);
    expect(stored.size).toBe(bytes.length);
    expect(upstream.requests.count).toBe(1);
    expect(r.db.issued).toEqual([]);
  });
});

describe.skipIf(!PG)("fetch leases across replicas (Postgres)", () => {
  let schema: TestSchema;
  let admin: Database;

  beforeEach(async () => {
    schema = await createTestSchema();
    admin = await openDatabase(schema.url);
    await migrate(admin);
    cleanups.push(async () => {
      await admin.close();
      await schema.drop();
    });
  });

  /** A replica with its own pool, owner and fake lease clock, on the shared store. */
  async function newReplica(
    name: string,
    options: { fetchUpstream?: FetchUpstream<GitHubPackage>; store?: ContentStore } = {},
  ): Promise<Replica & { clock: FakeClock }> {
    const db = await openDatabase(schema.url);
    const clock = new FakeClock();
    const r = replica({
      name,
      db,
      store: options.store ?? sharedStore(),
      leaseClock: clock,
      ...(options.fetchUpstream ? { fetchUpstream: options.fetchUpstream } : {}),
    });
    cleanups.push(async () => {
      await r.cache.stop();
      await r.leases?.stop();
      await db.close();
    });
    return { ...r, clock };
  }

  const rows = () => leaseRows(admin);

  /**
   * Replicas A and B on one held package of `size` bytes, with A's download under way and held
   * at the upstream: the lease is A's, so B's first ask finds it taken.
   */
  async function whileADownloads(size: number) {
    const held = await heldPackage(size);
    const a = await newReplica("a");
    const b = await newReplica("b");
    const gotA = a.cache.get(held.pkg);
    await held.upstream.requests.reached(1);
    return { ...held, a, b, gotA };
  }

  it("serves a miss on B from the file A stored under its lease, with no second download and no row left", async () => {
    const { upstream, pkg, b, gotA } = await whileADownloads(256 * 1024);
    expect(await rows()).toHaveLength(1);
    const gotB = b.cache.get(pkg);
    await b.clock.sleeping(); // B found the lease held and waits for its first poll
    expect(b.db.leaseQueries("acquire")).toBe(1);

    upstream.release();
    const storedA = await gotA;
    expect(await rows()).toEqual([]);
    await b.clock.advance(50);
    const storedB = await gotB;

    expect(storedB).toEqual(storedA);
    expect(upstream.requests.count).toBe(1);
    expect(b.upstreamFetches.count).toBe(0);
    expect(b.waits).toEqual(["served"]);
    expect(await rows()).toEqual([]);
  });

  it("runs one poll loop per replica however many of its callers wait", async () => {
    const { upstream, pkg, b, gotA } = await whileADownloads(64 * 1024);
    const gotB = Array.from({ length: 5 }, () => b.cache.get(pkg));
    await b.coalescedWaits.reached(4);
    await b.clock.sleeping();

    // Two polls while A still downloads: each reads the lease once, for all five callers.
    await b.clock.advance(50);
    await b.db.finished.read.reached(1);
    await b.clock.sleeping();
    expect(b.db.leaseQueries("read")).toBe(1);
    expect(b.clock.pending).toBe(1);
    await b.clock.advance(100);
    await b.db.finished.read.reached(2);
    await b.clock.sleeping();
    expect(b.db.leaseQueries("read")).toBe(2);
    expect(b.clock.pending).toBe(1);

    upstream.release();
    const storedA = await gotA;
    await b.clock.advance(200);
    for (const stored of await Promise.all(gotB)) expect(stored).toEqual(storedA);
    expect(b.db.leaseQueries("acquire")).toBe(1);
    expect(b.waits).toEqual(["served"]);
    expect(upstream.requests.count).toBe(1);
  });

  it("keeps waiting for the callers joined on B when B's leading caller disconnects", async () => {
    const { upstream, pkg, b, gotA } = await whileADownloads(64 * 1024);
    const leaving = new AbortController();
    const leader = b.cache.get(pkg, leaving.signal);
    const joined = b.cache.get(pkg);
    await b.coalescedWaits.reached(1);
    await b.clock.sleeping();
    leaving.abort();
    expect(((await leader.catch((e: unknown) => e)) as Error).name).toBe("AbortError");

    upstream.release();
    const storedA = await gotA;
    await b.clock.advance(50);
    expect(await joined).toEqual(storedA);
    expect(b.waits).toEqual(["served"]);
    expect(upstream.requests.count).toBe(1);
  });

  it("lets B and C fetch at once, in parallel, when A's fetch fails and it marks the lease failed", async () => {
    const { bytes, upstream, pkg } = await heldPackage(128 * 1024);
    upstream.failWith = 500;
    // A's request reaches the upstream (and its 500) only once B and C are waiting on A.
    const aFetching = deferred();
    const letAFail = deferred();
    const real = realUpstream();
    const a = await newReplica("a", {
      fetchUpstream: async (p, signal) => {
        aFetching.resolve();
        await letAFail.promise;
        return real(p, signal);
      },
    });
    const b = await newReplica("b");
    const c = await newReplica("c");

    const gotA = a.cache.get(pkg);
    await aFetching.promise;
    const gotB = b.cache.get(pkg);
    const gotC = c.cache.get(pkg);
    await b.clock.sleeping();
    await c.clock.sleeping();

    letAFail.resolve();
    const errA = await gotA.catch((e: unknown) => e);
    expect(isReposyncError(errA)).toBe(true);
    expect(upstream.requests.count).toBe(1);
    expect(await rows()).toMatchObject([{ owner: "replica-a", failed: true }]);

    // The upstream recovers; both waiters poll once, see the failed lease and fetch at once.
    upstream.failWith = undefined;
    await b.clock.advance(50);
    await c.clock.advance(50);
    // Both downloads are in flight at the held upstream before either is released: B and C each
    // pay one attempt side by side, not one after the other.
    await upstream.requests.reached(3);
    expect(b.upstreamFetches.count).toBe(1);
    expect(c.upstreamFetches.count).toBe(1);
    upstream.release();
    const [storedB, storedC] = await Promise.all([gotB, gotC]);
    expect(storedB).toEqual(storedC);
    expect(storedB.size).toBe(bytes.length);
    expect(b.waits).toEqual(["failed"]);
    expect(c.waits).toEqual(["failed"]);
    expect(upstream.requests.count).toBe(3);
  });

  it("takes over the lease of a holder that stopped renewing once it expires", async () => {
    const { bytes, upstream, pkg } = await heldPackage(64 * 1024);
    const key = leaseKey(pkg);
    // A crashed replica's live lease.
    expect(await acquireFetchLease(admin, key, "crashed")).toBe(true);
    const b = await newReplica("b");

    const gotB = b.cache.get(pkg);
    await b.clock.sleeping();
    expect(upstream.requests.count).toBe(0);
    // Its 30 s pass without a renewal (moved back, not slept through).
    await admin.exec(
      sql("update fetch_leases set expires_at = expires_at - 31000 where key = $1", key),
    );
    await b.clock.advance(50);
    await upstream.requests.reached(1);
    expect((await readFetchLease(admin, key))?.owner).toBe("replica-b");
    upstream.release();
    expect((await gotB).size).toBe(bytes.length);
    expect(b.waits).toEqual(["expired"]);
    expect(upstream.requests.count).toBe(1);
    expect(await rows()).toEqual([]);
  });

  it("renews the lease every 10 s while the download is held open", async () => {
    const { upstream, pkg } = await heldPackage(64 * 1024);
    const key = leaseKey(pkg);
    const a = await newReplica("a");

    const gotA = a.cache.get(pkg);
    await upstream.requests.reached(1);
    const taken = await readFetchLease(admin, key);
    // Five seconds left on it, as if 25 s of the download had gone by.
    await admin.exec(
      sql("update fetch_leases set expires_at = expires_at - 25000 where key = $1", key),
    );
    const aged = (await readFetchLease(admin, key))!.expiresAt;
    await a.clock.advance(9_999);
    expect(a.db.leaseQueries("renew")).toBe(0);
    await a.clock.advance(1);
    await a.db.finished.renew.reached(1);
    const renewed = (await readFetchLease(admin, key))!.expiresAt;
    expect(renewed).toBeGreaterThan(aged + 20_000);
    expect(renewed).toBeGreaterThanOrEqual(taken!.expiresAt);
    await a.clock.advance(10_000);
    await a.db.finished.renew.reached(2);

    upstream.release();
    await gotA;
    expect(await rows()).toEqual([]);
    // The renewal loop ended with the download.
    expect(a.clock.pending).toBe(0);
  });

  it("does not download again when another replica stored and released between the recheck and taking the lease", async () => {
    const { upstream, pkg } = await heldPackage(64 * 1024);
    const a = await newReplica("a");
    // B's second lookup (the coalescer's recheck) answers from before A stored, and is held
    // until A is done: the window a recheck-then-insert leaves open.
    const stale = new StaleRecheckStore({ root: path.join(dir, "packages") }, 2);
    const b = await newReplica("b", { store: stale });

    const gotB = b.cache.get(pkg);
    await stale.held.promise;
    upstream.release();
    const storedA = await a.cache.get(pkg);
    expect(await rows()).toEqual([]);
    stale.gate.resolve();

    expect(await gotB).toEqual(storedA);
    expect(b.db.leaseQueries("acquire")).toBe(1);
    expect(b.db.leaseQueries("release")).toBe(1);
    expect(b.upstreamFetches.count).toBe(0);
    expect(upstream.requests.count).toBe(1);
    expect(await rows()).toEqual([]);
  });

  it("logs a failing lease statement and fetches without a lease (table dropped, or every statement refused)", async () => {
    const { bytes, upstream, pkg } = await heldPackage(64 * 1024, 1);
    upstream.release();
    const a = await newReplica("a");
    await admin.runScript("drop table fetch_leases");
    expect((await a.cache.get(pkg)).size).toBe(bytes.length);
    expect(a.warnings.map((w) => w.msg)).toEqual([
      "taking a fetch lease failed; fetching without one",
    ]);
    expect(JSON.stringify(a.warnings[0]?.obj)).toMatch(/fetch_leases/);

    const { bytes: other, upstream: second, pkg: otherPkg } = await heldPackage(64 * 1024, 2);
    second.release();
    const b = await newReplica("b");
    b.db.breakLeases = true;
    expect((await b.cache.get(otherPkg)).size).toBe(other.length);
    expect(b.warnings.map((w) => w.msg)).toEqual([
      "taking a fetch lease failed; fetching without one",
    ]);
    expect(upstream.requests.count + second.requests.count).toBe(2);
  });

  it("logs a lease read failing mid-wait and fetches without waiting any longer", async () => {
    const { upstream, pkg, b, gotA } = await whileADownloads(64 * 1024);
    const gotB = b.cache.get(pkg);
    await b.clock.sleeping();
    b.db.breakLeases = true;
    await b.clock.advance(50);
    // B's own download starts while A's is still held.
    await upstream.requests.reached(2);
    upstream.release();
    expect(await gotB).toEqual(await gotA);
    expect(b.waits).toEqual(["error"]);
    expect(b.warnings.map((w) => w.msg)).toEqual([
      "reading a fetch lease failed; fetching without one",
    ]);
  });

  it("sends no lease statement for a cache hit, on the replica that stored it or another", async () => {
    const { upstream, pkg } = await heldPackage(64 * 1024);
    upstream.release();
    const a = await newReplica("a");
    const b = await newReplica("b");
    await a.cache.get(pkg);
    expect(a.db.leaseQueries()).toBe(2); // take it, release it

    const before = a.db.issued.length;
    await a.cache.get(pkg);
    await b.cache.get(pkg);
    expect(a.db.issued.length).toBe(before);
    expect(b.db.issued).toEqual([]);
    expect(upstream.requests.count).toBe(1);
  });

  it("reclaims rows expired for over a minute on start and every 5 minutes, never a live one", async () => {
    await acquireFetchLease(admin, "package:old", "crashed");
    await acquireFetchLease(admin, "package:live", "other");
    await admin.exec(
      sql("update fetch_leases set expires_at = expires_at - 120000 where key = 'package:old'"),
    );
    const clock = new FakeClock();
    const db = new CountingDatabase(admin);
    const leases = new FetchLeases({ db, owner: "me", clock });
    leases.start();
    leases.start();
    await db.finished.reclaim.reached(1);
    expect((await rows()).map((r) => r.key)).toEqual(["package:live"]);

    await acquireFetchLease(admin, "package:old2", "crashed");
    await admin.exec(
      sql("update fetch_leases set expires_at = expires_at - 120000 where key = 'package:old2'"),
    );
    await clock.advance(5 * 60_000);
    await db.finished.reclaim.reached(2);
    expect((await rows()).map((r) => r.key)).toEqual(["package:live"]);
    expect(db.leaseQueries("reclaim")).toBe(2);
    await leases.stop();
    expect(clock.pending).toBe(0);
  });
});

/**
 * The shared store, except that its `nth` lookup answers from before a concurrent store: the
 * result is taken first, then held until the test opens `gate`.
 */
class StaleRecheckStore extends ContentStore {
  private opens = 0;
  readonly held: Deferred<void> = deferred();
  readonly gate: Deferred<void> = deferred();

  constructor(
    options: ConstructorParameters<typeof ContentStore>[0],
    private readonly nth: number,
  ) {
    super(options);
  }

  override async open(sha256: string): Promise<StoredPackage | undefined> {
    const result = await super.open(sha256);
    if (++this.opens === this.nth) {
      this.held.resolve();
      await this.gate.promise;
    }
    return result;
  }
}
