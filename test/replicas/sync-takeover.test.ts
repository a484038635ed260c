import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, type ServeProcess } from "../server/cli-process.js";
import { FakeGitHub } from "../support/fake-github.js";
import { createTestSchema, havePostgres, type TestSchema } from "../support/postgres.js";
import {
  cli,
  getBytes,
  pollUntil,
  primaryPackages,
  query,
  replicaEnv,
  repomdEntries,
  rpmAssets,
  servedRepomd,
  startReplicas,
  stopReplicas,
} from "./replicas-harness.js";

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
  let gh: FakeGitHub | undefined;
  let schema: TestSchema | undefined;
  let dataDir: string | undefined;
  let replicas: ServeProcess[] = [];

  beforeAll(() => {
    ensureBuilt();
  }, 120_000);

  afterEach(async () => {
    await stopReplicas(replicas);
    replicas = [];
    await gh?.close();
    await schema?.drop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("has its sync taken over by another replica once its lease expires, with every package stored once", async () => {
    gh = await FakeGitHub.start();
    schema = await createTestSchema();
    dataDir = await mkdtemp(path.join(tmpdir(), "reposync-replicas-kill-"));
    const env = replicaEnv(gh, schema, { REPOSYNC_SYNC_LEASE: LEASE });
    gh.addRepo({ owner: "acme", repo: "big" });
    const { assetIds } = gh.addRelease("acme", "big", {
      tag: "v1",
      assets: rpmAssets("big", ASSETS),
    });
    replicas = await startReplicas(3, dataDir, env);

    // The first scan stalls on the header of the sixth asset, five headers in: mid-scan.
    const stallOn = assetIds[5];
    let stalled = false;
    gh.holdCdn = (r) => {
      if (stalled || r.assetId !== stallOn || r.range === undefined) return false;
      stalled = true;
      return true;
    };
    await cli(["add-remote", "big", "acme/big"], env);
    await pollUntil("the scan to stall mid-way", () => (gh?.heldCdn.length ? true : undefined));

    const state = async () =>
      (
        await query<StateRow>(
          schema!,
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
      const repomd = (await servedRepomd(r.url, "big")).toString("utf8");
      const primary = repomdEntries(repomd).find((e) => e.type === "primary");
      const gz = await getBytes(`${r.url}/big/${primary?.href}`);
      expect(primaryPackages(gz.body)).toHaveLength(ASSETS);
    }
  }, 90_000);
});
