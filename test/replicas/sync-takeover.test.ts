import { describe, expect, it } from "vitest";
import { havePostgres } from "../support/postgres.js";
import { clusterPerTest } from "./cluster-per-test.js";
import { cli, pollUntil, query, rpmAssets, servedPackages } from "./replicas-harness.js";

const PG = await havePostgres();
const ASSETS = 10;
/** Short enough for a test, long enough that a live holder's renewals (every 750 ms) keep it. */
const LEASE = "3s";

interface StateRow {
  [key: string]: unknown;
  sync_lease_owner: string | null;
  sync_lease_expires: string | null;
  last_synced_at: string | null;
  last_result: string | null;
}

describe.skipIf(!PG)("a replica killed mid-scan", () => {
  const newCluster = clusterPerTest("reposync-replicas-kill-");

  it("has its sync taken over by another replica once its lease expires, with every package stored once", async () => {
    const cluster = await newCluster();
    const { gh, schema } = cluster;
    const env = cluster.env({ REPOSYNC_SYNC_LEASE: LEASE });
    gh.addRepo({ owner: "acme", repo: "big" });
    const { assetIds } = gh.addRelease("acme", "big", {
      tag: "v1",
      assets: rpmAssets("big", ASSETS),
    });
    const replicas = await cluster.startReplicas(3, env);

    // The first scan stalls on the header of the sixth asset, five headers in: mid-scan.
    const stallOn = assetIds[5];
    let stalled = false;
    gh.holdCdn = (r) => {
      if (stalled || r.assetId !== stallOn || r.range === undefined) return false;
      stalled = true;
      return true;
    };
    await cli(["add-remote", "big", "acme/big"], env);
    await pollUntil("the scan to stall mid-way", () => (gh.heldCdn.length ? true : undefined));

    const state = async () =>
      (
        await query<StateRow>(
          schema,
          `select sync_lease_owner, sync_lease_expires, last_synced_at, last_result
           from github_rpm_sync_state where remote_name = 'big'`,
        )
      )[0];
    const held = await state();
    const holderPid = Number(held?.sync_lease_owner?.split(":").at(-2));
    const holder = replicas.find((r) => r.child.pid === holderPid);
    if (!holder) throw new Error(`no replica has the lease owner's pid: ${held?.sync_lease_owner}`);
    const readsBefore = gh.seen.filter((s) => s.server === "cdn" && s.status === 206).length;
    expect(readsBefore).toBeGreaterThanOrEqual(5);

    await holder.stop("SIGKILL");
    // The last expiry the holder wrote before it died: nobody may scan before it.
    const orphaned = await state();
    expect(orphaned?.sync_lease_owner).toBe(held?.sync_lease_owner);
    const expiredAt = Number(orphaned?.sync_lease_expires);
    const killedAt = Date.now();
    gh.releaseHeldCdn();

    const done = await pollUntil(
      "another replica to complete the sync",
      async () => {
        const s = await state();
        return s?.last_synced_at !== null && s?.last_synced_at !== undefined ? s : undefined;
      },
      30_000,
      50,
    );
    expect(done.last_result).toBe("ok");
    expect(done.sync_lease_owner).toBeNull();

    // The takeover listed the releases again only after the dead holder's lease had expired
    // (the database clock is this host's clock, as the fake's timestamps are).
    const relisted = gh.seen.filter(
      (s) =>
        s.server === "api" &&
        s.path.startsWith("/api/v3/repos/acme/big/releases") &&
        s.at >= killedAt,
    );
    expect(relisted).toHaveLength(1);
    expect(relisted[0]!.at).toBeGreaterThanOrEqual(expiredAt);

    const rows = await query<{ asset_id: string; n: string }>(
      schema,
      "select asset_id, count(*) as n from packages where remote_name = 'big' group by asset_id order by asset_id",
    );
    expect(rows.map((r) => Number(r.asset_id))).toEqual([...assetIds].sort((a, b) => a - b));
    expect(rows.every((r) => Number(r.n) === 1)).toBe(true);

    // Both survivors serve the snapshot of all ten packages.
    const survivors = replicas.filter((r) => r !== holder);
    for (const r of survivors) {
      expect(await servedPackages(r.url, "big")).toHaveLength(ASSETS);
    }
  }, 90_000);
});
