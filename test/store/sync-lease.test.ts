import { describe, expect, it } from "vitest";
import { type Database, type Queryable, sql } from "../../src/store/port.js";
import { addRemote } from "../../src/store/remotes.js";
import {
  claimSyncLease,
  claimSyncLeaseStatement,
  getSyncState,
  releaseSyncLease,
  renewSyncLease,
  SYNC_LEASE_MS,
} from "../../src/store/sync-lease.js";
import { plainRemote } from "../support/fixtures.js";
import { raceBehindBlocker, raceOnSqlite } from "./contention.js";
import { DIALECTS, useFreshDatabase } from "./harness.js";

const INTERVAL = 300_000;
const REMOTE = plainRemote("demo", "acme/demo", { intervalMs: INTERVAL });

// Time moves by moving the row's timestamps back: the statements read the database clock, so
// "the interval passed" is the same as "the last sync was an interval earlier".
async function ageLastSync(db: Queryable, ms: number): Promise<void> {
  await db.exec(
    sql(
      "update github_rpm_sync_state set last_synced_at = last_synced_at - $2 where remote_name = $1",
      "demo",
      ms,
    ),
  );
}
async function ageLease(db: Queryable, ms: number): Promise<void> {
  await db.exec(
    sql(
      "update github_rpm_sync_state set sync_lease_expires = sync_lease_expires - $2 where remote_name = $1",
      "demo",
      ms,
    ),
  );
}

describe.each(DIALECTS)("the sync lease on %s", (dialect) => {
  const t = useFreshDatabase(dialect);
  const claim = (owner: string, prime = false) =>
    claimSyncLease(t.db(), { remote: "demo", owner, prime });

  it("is claimed by the first periodic claim of a never-synced remote, and then by nobody else", async () => {
    await addRemote(t.db(), REMOTE);
    const got = await claim("a");
    expect(got).toMatchObject({ etags: [], lastSyncedAt: null });
    expect(await claim("b")).toBeUndefined();
    expect(await claim("b", true)).toBeUndefined();
    const state = await getSyncState(t.db(), "demo");
    expect(state).toMatchObject({ leaseOwner: "a", leaseLive: true });
    expect(state!.leaseExpires! - state!.readAt).toBeGreaterThan(SYNC_LEASE_MS - 5_000);
  });

  it("does not claim a remote that does not exist", async () => {
    expect(await claim("a", true)).toBeUndefined();
    expect(await getSyncState(t.db(), "demo")).toBeUndefined();
  });

  it("records the sync on release and hands its ETags to the next claim", async () => {
    await addRemote(t.db(), REMOTE);
    await claim("a");
    expect(
      await releaseSyncLease(t.db(), "demo", "a", { result: "ok", etags: ['W/"p1"', '"p2"'] }),
    ).toBe(true);
    const state = await getSyncState(t.db(), "demo");
    expect(state).toMatchObject({
      leaseOwner: null,
      leaseLive: false,
      lastResult: "ok",
      lastError: null,
    });
    expect(state!.lastSyncedAt).toBeGreaterThan(state!.readAt - 60_000);
    expect(state!.etags).toEqual(['W/"p1"', '"p2"']);
    const next = await claim("b", true);
    expect(next?.etags).toEqual(['W/"p1"', '"p2"']);
    expect(next?.lastSyncedAt).toBe(state!.lastSyncedAt);
  });

  it("keeps the stored ETags and records the reason when a sync fails", async () => {
    await addRemote(t.db(), REMOTE);
    await claim("a");
    await releaseSyncLease(t.db(), "demo", "a", { result: "ok", etags: ['"e1"'] });
    await claim("a", true);
    await releaseSyncLease(t.db(), "demo", "a", { result: "error", error: "GitHub said 502" });
    expect(await getSyncState(t.db(), "demo")).toMatchObject({
      etags: ['"e1"'],
      lastResult: "error",
      lastError: "GitHub said 502",
    });
  });

  it("blocks a periodic claim after a fresh sync until the interval has passed", async () => {
    await addRemote(t.db(), REMOTE);
    await claim("a");
    await releaseSyncLease(t.db(), "demo", "a", { result: "ok", etags: [] });
    expect(await claim("b")).toBeUndefined();
    await ageLastSync(t.db(), INTERVAL - 10_000);
    expect(await claim("b")).toBeUndefined();
    await ageLastSync(t.db(), 10_000);
    expect(await claim("b")).toBeDefined();
  });

  it("lets a prime claim a freshly synced remote, but not one with a live lease", async () => {
    await addRemote(t.db(), REMOTE);
    await claim("a");
    await releaseSyncLease(t.db(), "demo", "a", { result: "ok", etags: [] });
    expect(await claim("prime-1", true)).toBeDefined();
    expect(await claim("prime-2", true)).toBeUndefined();
    expect((await getSyncState(t.db(), "demo"))?.leaseOwner).toBe("prime-1");
  });

  it("lets another owner take over an expired lease, after which the old owner can do nothing", async () => {
    await addRemote(t.db(), REMOTE);
    await claim("a");
    await ageLease(t.db(), SYNC_LEASE_MS - 10_000);
    expect(await claim("b")).toBeUndefined(); // 10 s left: still live
    await ageLease(t.db(), 11_000);
    expect(await claim("b")).toBeDefined();
    expect(await renewSyncLease(t.db(), "demo", "a")).toBe(false);
    expect(await releaseSyncLease(t.db(), "demo", "a", { result: "ok", etags: ['"x"'] })).toBe(
      false,
    );
    expect(await getSyncState(t.db(), "demo")).toMatchObject({
      leaseOwner: "b",
      leaseLive: true,
      lastSyncedAt: null,
      etags: [],
    });
  });

  it("lets only the owner renew or release", async () => {
    await addRemote(t.db(), REMOTE);
    await claim("a");
    await ageLease(t.db(), SYNC_LEASE_MS - 10_000);
    const before = await getSyncState(t.db(), "demo");
    expect(await renewSyncLease(t.db(), "demo", "b")).toBe(false);
    expect(await releaseSyncLease(t.db(), "demo", "b", { result: "ok" })).toBe(false);
    expect((await getSyncState(t.db(), "demo"))?.leaseExpires).toBe(before?.leaseExpires);
    expect((await getSyncState(t.db(), "demo"))?.lastSyncedAt).toBeNull();

    expect(await renewSyncLease(t.db(), "demo", "a")).toBe(true);
    const after = await getSyncState(t.db(), "demo");
    expect(after!.leaseExpires! - after!.readAt).toBeGreaterThan(SYNC_LEASE_MS - 5_000);
    expect(await releaseSyncLease(t.db(), "demo", "a", { result: "ok" })).toBe(true);
    expect((await getSyncState(t.db(), "demo"))?.leaseOwner).toBeNull();
  });

  it("gives 20 concurrent claims of one remote exactly one holder", async () => {
    await addRemote(t.db(), REMOTE);
    const owners = Array.from({ length: 20 }, (_, i) => `replica-${i}`);
    let results: number[];
    if (dialect === "sqlite") {
      results = await raceOnSqlite(
        t.url(),
        owners.map((owner) => claimSyncLeaseStatement("sqlite", { remote: "demo", owner })),
      );
    } else {
      const replicas = [await t.open(), await t.open()];
      // The blocker's uncommitted insert of the row makes every contender wait on it; the
      // rollback lets all 20 race to insert the row themselves.
      results = await raceBehindBlocker({
        schemaUrl: t.url(),
        setup: sql("insert into github_rpm_sync_state (remote_name) values ($1)", "demo"),
        finish: "rollback",
        waiters: 20,
        start: () =>
          owners.map((owner, i) =>
            claimSyncLease(replicas[i % 2] as Database, { remote: "demo", owner }).then((c) =>
              c ? 1 : 0,
            ),
          ),
      });
    }
    expect(results.reduce((a, b) => a + b, 0)).toBe(1);
    const holder = owners[results.indexOf(1)];
    expect((await getSyncState(t.db(), "demo"))?.leaseOwner).toBe(holder);
  });

  it("gives 20 concurrent takeovers of an expired lease exactly one holder", async () => {
    await addRemote(t.db(), REMOTE);
    await claim("crashed");
    await ageLease(t.db(), SYNC_LEASE_MS + 1);
    const owners = Array.from({ length: 20 }, (_, i) => `replica-${i}`);
    let results: number[];
    if (dialect === "sqlite") {
      results = await raceOnSqlite(
        t.url(),
        owners.map((owner) =>
          claimSyncLeaseStatement("sqlite", { remote: "demo", owner, prime: true }),
        ),
      );
    } else {
      const replicas = [await t.open(), await t.open()];
      // The blocker holds the row lock (a no-op update); all 20 queue on it, then see the same row.
      results = await raceBehindBlocker({
        schemaUrl: t.url(),
        setup: sql(
          "update github_rpm_sync_state set last_error = null where remote_name = $1",
          "demo",
        ),
        finish: "commit",
        waiters: 20,
        start: () =>
          owners.map((owner, i) =>
            claimSyncLease(replicas[i % 2] as Database, {
              remote: "demo",
              owner,
              prime: true,
            }).then((c) => (c ? 1 : 0)),
          ),
      });
    }
    expect(results.reduce((a, b) => a + b, 0)).toBe(1);
    expect((await getSyncState(t.db(), "demo"))?.leaseOwner).toBe(owners[results.indexOf(1)]);
  });
});
