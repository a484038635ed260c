import { describe, expect, it } from "vitest";
import {
  acquireFetchLease,
  FETCH_LEASE_MS,
  markFetchLeaseFailed,
  readFetchLease,
  reclaimFetchLeases,
  releaseFetchLease,
  renewFetchLease,
} from "../../src/store/fetch-lease.js";
import { type Database, type Queryable, sql } from "../../src/store/port.js";
import { raceBehindBlocker } from "./contention.js";
import { DIALECTS, PG, useFreshDatabase } from "./harness.js";

const KEY = "pkg:demo:7:sha256:abc";

// Moves a lease's expiry into the past instead of waiting for it.
async function age(db: Queryable, key: string, ms: number): Promise<void> {
  await db.exec(
    sql("update fetch_leases set expires_at = expires_at - $2 where key = $1", key, ms),
  );
}

describe.each(DIALECTS)("fetch leases on %s", (dialect) => {
  const t = useFreshDatabase(dialect);

  it("is acquired once per key; a second owner waits while it is live", async () => {
    expect(await acquireFetchLease(t.db(), KEY, "a")).toBe(true);
    expect(await acquireFetchLease(t.db(), KEY, "b")).toBe(false);
    expect(await acquireFetchLease(t.db(), "other", "b")).toBe(true);
    expect(await readFetchLease(t.db(), KEY)).toMatchObject({
      owner: "a",
      failed: false,
      live: true,
    });
  });

  it("is renewed by its owner only", async () => {
    await acquireFetchLease(t.db(), KEY, "a");
    await age(t.db(), KEY, FETCH_LEASE_MS - 10_000);
    const before = await readFetchLease(t.db(), KEY);
    expect(await renewFetchLease(t.db(), KEY, "b")).toBe(false);
    expect((await readFetchLease(t.db(), KEY))?.expiresAt).toBe(before?.expiresAt);
    expect(await renewFetchLease(t.db(), KEY, "a")).toBe(true);
    // Renewed to a full lease from now: at least the 20 s the row was aged by (equal when the
    // acquire and the renew fell in one millisecond of the database clock).
    expect((await readFetchLease(t.db(), KEY))!.expiresAt).toBeGreaterThanOrEqual(
      before!.expiresAt + 20_000,
    );
  });

  it("is released by its owner only, and can then be acquired again", async () => {
    await acquireFetchLease(t.db(), KEY, "a");
    expect(await releaseFetchLease(t.db(), KEY, "b")).toBe(false);
    expect((await readFetchLease(t.db(), KEY))?.owner).toBe("a");
    expect(await releaseFetchLease(t.db(), KEY, "a")).toBe(true);
    expect(await readFetchLease(t.db(), KEY)).toBeUndefined();
    expect(await acquireFetchLease(t.db(), KEY, "b")).toBe(true);
  });

  it("is marked failed by its owner only; a failed lease is taken over at once", async () => {
    await acquireFetchLease(t.db(), KEY, "a");
    expect(await markFetchLeaseFailed(t.db(), KEY, "b")).toBe(false);
    expect((await readFetchLease(t.db(), KEY))?.failed).toBe(false);
    expect(await markFetchLeaseFailed(t.db(), KEY, "a")).toBe(true);
    expect(await readFetchLease(t.db(), KEY)).toMatchObject({ failed: true, live: false });
    expect(await renewFetchLease(t.db(), KEY, "a")).toBe(false);
    expect(await acquireFetchLease(t.db(), KEY, "b")).toBe(true);
    expect(await readFetchLease(t.db(), KEY)).toMatchObject({
      owner: "b",
      failed: false,
      live: true,
    });
  });

  it("is taken over once expired, and the old owner loses it", async () => {
    await acquireFetchLease(t.db(), KEY, "a");
    // 10 s left: live, with a margin no slow machine eats between two statements.
    await age(t.db(), KEY, FETCH_LEASE_MS - 10_000);
    expect(await acquireFetchLease(t.db(), KEY, "b")).toBe(false);
    await age(t.db(), KEY, 11_000);
    expect((await readFetchLease(t.db(), KEY))?.live).toBe(false);
    expect(await acquireFetchLease(t.db(), KEY, "b")).toBe(true);
    expect(await renewFetchLease(t.db(), KEY, "a")).toBe(false);
    expect(await releaseFetchLease(t.db(), KEY, "a")).toBe(false);
    expect((await readFetchLease(t.db(), KEY))?.owner).toBe("b");
  });

  it("reclaims rows expired long enough, failed or not, and never a live one", async () => {
    for (const k of ["live", "live-failed", "just-expired", "old", "old-failed"]) {
      await acquireFetchLease(t.db(), k, "a");
    }
    await markFetchLeaseFailed(t.db(), "live-failed", "a");
    await markFetchLeaseFailed(t.db(), "old-failed", "a");
    await age(t.db(), "just-expired", FETCH_LEASE_MS + 1_000);
    await age(t.db(), "old", FETCH_LEASE_MS + 120_000);
    await age(t.db(), "old-failed", FETCH_LEASE_MS + 120_000);
    expect(await reclaimFetchLeases(t.db(), 60_000)).toBe(2);
    const left = await t
      .db()
      .query<{ key: string }>(sql("select key from fetch_leases order by key"));
    expect(left.map((r) => r.key)).toEqual(["just-expired", "live", "live-failed"]);
    expect(await reclaimFetchLeases(t.db(), 0)).toBe(1);
  });
});

describe.skipIf(!PG)("fetch leases on Postgres with 20 concurrent contenders", () => {
  const t = useFreshDatabase("postgres");
  const owners = Array.from({ length: 20 }, (_, i) => `replica-${i}`);

  async function race(
    setup: ReturnType<typeof sql>,
    finish: "commit" | "rollback",
    extra: (replicas: Database[]) => Promise<number>[] = () => [],
  ): Promise<{ acquired: number[]; extra: number[] }> {
    const replicas = [await t.open(), await t.open(), await t.open()];
    let extraCount = 0;
    const all = await raceBehindBlocker({
      schemaUrl: t.url(),
      setup,
      finish,
      start: () => {
        const more = extra(replicas);
        extraCount = more.length;
        return [
          ...more,
          ...owners.map((o, i) =>
            acquireFetchLease(replicas[i % 2] as Database, KEY, o).then((ok) => (ok ? 1 : 0)),
          ),
        ];
      },
    });
    return { extra: all.slice(0, extraCount), acquired: all.slice(extraCount) };
  }

  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

  it("acquire: exactly one of 20 gets a new key", async () => {
    const { acquired } = await race(
      sql("insert into fetch_leases (key, owner, expires_at) values ($1, 'blocker', 0)", KEY),
      "rollback",
    );
    expect(sum(acquired)).toBe(1);
    expect((await readFetchLease(t.db(), KEY))?.owner).toBe(owners[acquired.indexOf(1)]);
  });

  it("takeover: exactly one of 20 takes an expired lease", async () => {
    await acquireFetchLease(t.db(), KEY, "crashed");
    await age(t.db(), KEY, FETCH_LEASE_MS + 1);
    const { acquired } = await race(
      sql("update fetch_leases set owner = owner where key = $1", KEY),
      "commit",
    );
    expect(sum(acquired)).toBe(1);
    expect((await readFetchLease(t.db(), KEY))?.owner).toBe(owners[acquired.indexOf(1)]);
  });

  it("takeover: exactly one of 20 takes a lease its holder marked failed", async () => {
    await acquireFetchLease(t.db(), KEY, "holder");
    const { acquired } = await race(
      sql("update fetch_leases set failed = true where key = $1 and owner = 'holder'", KEY),
      "commit",
    );
    expect(sum(acquired)).toBe(1);
    expect(await readFetchLease(t.db(), KEY)).toMatchObject({
      owner: owners[acquired.indexOf(1)],
      failed: false,
      live: true,
    });
  });

  it("renew: the holder keeps its lease while 20 others try to take it", async () => {
    await acquireFetchLease(t.db(), KEY, "holder");
    await age(t.db(), KEY, FETCH_LEASE_MS - 10_000);
    const before = await readFetchLease(t.db(), KEY);
    const { acquired, extra } = await race(
      sql("update fetch_leases set owner = owner where key = $1", KEY),
      "commit",
      (r) => [renewFetchLease(r[2] as Database, KEY, "holder").then((ok) => (ok ? 1 : 0))],
    );
    expect(extra).toEqual([1]);
    expect(sum(acquired)).toBe(0);
    const after = await readFetchLease(t.db(), KEY);
    expect(after).toMatchObject({ owner: "holder", live: true });
    expect(after!.expiresAt).toBeGreaterThan(before!.expiresAt);
  });

  it("release: while 20 contend, the lease ends with at most one new holder, and a row only for it", async () => {
    await acquireFetchLease(t.db(), KEY, "holder");
    const { acquired, extra } = await race(
      sql("update fetch_leases set owner = owner where key = $1", KEY),
      "commit",
      (r) => [releaseFetchLease(r[2] as Database, KEY, "holder").then((ok) => (ok ? 1 : 0))],
    );
    expect(extra).toEqual([1]);
    expect(sum(acquired)).toBeLessThanOrEqual(1);
    const row = await readFetchLease(t.db(), KEY);
    if (sum(acquired) === 1) expect(row?.owner).toBe(owners[acquired.indexOf(1)]);
    else expect(row).toBeUndefined();
  });

  it("failure: after the holder marks it failed amid 20 contenders, at most one takes it over", async () => {
    await acquireFetchLease(t.db(), KEY, "holder");
    const { acquired, extra } = await race(
      sql("update fetch_leases set owner = owner where key = $1", KEY),
      "commit",
      (r) => [markFetchLeaseFailed(r[2] as Database, KEY, "holder").then((ok) => (ok ? 1 : 0))],
    );
    const row = await readFetchLease(t.db(), KEY);
    expect(sum(acquired)).toBeLessThanOrEqual(1);
    if (sum(acquired) === 1) {
      expect(row).toMatchObject({ owner: owners[acquired.indexOf(1)], failed: false });
    } else {
      // Every contender ran before the failure mark: they saw a live lease and the mark landed.
      expect(extra).toEqual([1]);
      expect(row).toMatchObject({ owner: "holder", failed: true });
    }
  });

  it("reclaim: racing 20 acquirers on an expired row leaves exactly one holder and its row", async () => {
    await acquireFetchLease(t.db(), KEY, "crashed");
    await age(t.db(), KEY, FETCH_LEASE_MS + 120_000);
    const { acquired, extra } = await race(
      sql("update fetch_leases set owner = owner where key = $1", KEY),
      "commit",
      (r) => [reclaimFetchLeases(r[2] as Database, 60_000)],
    );
    expect(sum(acquired)).toBe(1);
    expect(extra[0]).toBeLessThanOrEqual(1);
    expect(await readFetchLease(t.db(), KEY)).toMatchObject({
      owner: owners[acquired.indexOf(1)],
      live: true,
    });
  });
});
