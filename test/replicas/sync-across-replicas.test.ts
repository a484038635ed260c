import { gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import type { ServeProcess } from "../server/cli-process.js";
import type { FakeGitHub } from "../support/fake-github.js";
import { havePostgres } from "../support/postgres.js";
import { clusterPerTest } from "./cluster-per-test.js";
import {
  cli,
  getBytes,
  metricValue,
  pollUntil,
  primaryPackages,
  query,
  repomdEntries,
  rpmAssets,
  servedRepomd,
  sha256,
} from "./replicas-harness.js";

const PG = await havePostgres();

/** Listing requests (first pages, 304s included) the fake saw for acme/<repo>, with times. */
function listings(gh: FakeGitHub, repo: string): number[] {
  const page = `/api/v3/repos/acme/${repo}/releases`;
  return gh.seen
    .filter((s) => s.server === "api" && s.path.split("?")[0] === page)
    .map((s) => s.at);
}

async function skipped(replica: ServeProcess): Promise<number> {
  const text = await (await fetch(`${replica.url}/metrics`)).text();
  return metricValue(text, "reposync_syncs_total", 'status="skipped"');
}

/**
 * Fetches every file `repomd` names from every replica and checks that each answers 200 with
 * the same bytes everywhere, matching repomd.xml's checksum, open-checksum and size; returns the
 * packages of its primary.xml.
 */
async function expectServedEverywhere(
  replicas: readonly ServeProcess[],
  remote: string,
  repomd: string,
): Promise<{ href: string; sha256: string }[]> {
  const entries = repomdEntries(repomd);
  expect(entries.map((e) => e.type).sort()).toEqual(["filelists", "other", "primary"]);
  let packages: { href: string; sha256: string }[] = [];
  for (const entry of entries) {
    const bodies = await Promise.all(
      replicas.map((r) => getBytes(`${r.url}/${remote}/${entry.href}`)),
    );
    for (const [i, got] of bodies.entries()) {
      expect(got.status, `${entry.href} from replica ${i}`).toBe(200);
      expect(sha256(got.body), `${entry.href} from replica ${i}`).toBe(entry.checksum);
      expect(got.body.length).toBe(entry.size);
      expect(got.body.equals(bodies[0]!.body)).toBe(true);
    }
    expect(sha256(gunzipSync(bodies[0]!.body))).toBe(entry.openChecksum);
    if (entry.type === "primary") packages = primaryPackages(bodies[0]!.body);
  }
  return packages;
}

describe.skipIf(!PG)("the syncer across three replicas", () => {
  const newCluster = clusterPerTest("reposync-replicas-sync-");

  it("scans a remote once for add-remote and a cold request on another replica, once for `reposync sync`, and every replica serves every file either repomd.xml names", async () => {
    const c = await newCluster();
    const env = c.env();
    c.gh.addRepo({ owner: "acme", repo: "one" });
    const assets = rpmAssets("one", 3);
    const first = c.gh.addRelease("acme", "one", { tag: "v1", assets });
    await c.startReplicas(2, env);

    // Hold the scan's header reads, so the scan stays in flight under its lease.
    const firstIds = new Set(first.assetIds);
    c.gh.holdCdn = (r) => r.range !== undefined && firstIds.has(r.assetId);
    await cli(["add-remote", "one", "acme/one"], env);
    await pollUntil("a replica's scan of the new remote to read a header", () =>
      c.gh.heldCdn.length > 0 ? true : undefined,
    );
    // The third replica starts now, so that nothing but the cold request below makes it try a
    // sync of the remote: its scheduler passes over a remote whose lease is held.
    const [other] = await c.startReplicas(1, env);
    if (!other) throw new Error("the third replica did not start");

    // A cold request on it asks it for a prime, which finds the lease held.
    const before = await skipped(other);
    const cold = getBytes(`${other.url}/one/repodata/repomd.xml`);
    await pollUntil("the cold replica's prime to find the lease busy", async () =>
      (await skipped(other)) > before ? true : undefined,
    );
    c.gh.holdCdn = undefined;
    c.gh.releaseHeldCdn();
    const coldAnswer = await cold;
    expect(coldAnswer.status).toBe(200);

    const v1 = await Promise.all(c.replicas.map((r) => servedRepomd(r.url, "one")));
    for (const repomd of v1) expect(repomd.equals(coldAnswer.body)).toBe(true);
    expect(listings(c.gh, "one")).toHaveLength(1);
    const v1Packages = await expectServedEverywhere(c.replicas, "one", v1[0]!.toString("utf8"));
    expect(v1Packages).toHaveLength(3);

    // `reposync sync` marks the remote; of the three replicas that see the mark, one scans.
    c.gh.addRelease("acme", "one", { tag: "v2", assets: rpmAssets("two", 1) });
    await cli(["sync", "one"], env);
    await pollUntil("the requested sync to end", async () => {
      const [row] = await query<{ requested: string | null; result: string | null }>(
        c.schema,
        `select r.sync_requested_at as requested, s.last_result as result
         from remotes r join github_rpm_sync_state s on s.remote_name = r.name
         where r.name = 'one' and s.sync_lease_owner is null`,
      );
      return row && row.requested === null && listings(c.gh, "one").length > 1 ? row : undefined;
    });
    const v2 = await Promise.all(
      c.replicas.map((r) =>
        pollUntil(`${r.url} to serve the new repomd.xml`, async () => {
          const got = await getBytes(`${r.url}/one/repodata/repomd.xml`);
          return got.status === 200 && !got.body.equals(v1[0]!) ? got.body : undefined;
        }),
      ),
    );
    for (const repomd of v2) expect(repomd.equals(v2[0]!)).toBe(true);
    // The files of the snapshot before are still served by every replica, for the clients
    // that read the old repomd.xml a moment ago.
    expect(await expectServedEverywhere(c.replicas, "one", v1[0]!.toString("utf8"))).toEqual(
      v1Packages,
    );
    const v2Packages = await expectServedEverywhere(c.replicas, "one", v2[0]!.toString("utf8"));
    expect(v2Packages).toHaveLength(4);
    expect(listings(c.gh, "one")).toHaveLength(2);
  }, 90_000);

  it("lists each of five remotes once per interval in total, whichever replica's scheduler ticks", async () => {
    const c = await newCluster();
    const env = c.env({ GITHUB_SYNC_POLL_INTERVAL: "1s" });
    const names = ["r1", "r2", "r3", "r4", "r5"];
    for (const name of names) {
      c.gh.addRepo({ owner: "acme", repo: name });
      c.gh.addRelease("acme", name, { tag: "v1", assets: rpmAssets(name, 1) });
      await cli(["add-remote", name, `acme/${name}`, "--interval", "10s"], env);
    }
    await c.startReplicas(3, env);

    // The first scan of each remote, then one per interval: three intervals after the first.
    await pollUntil(
      "four listings of every remote",
      () => (names.every((n) => listings(c.gh, n).length >= 4) ? true : undefined),
      80_000,
      100,
    );
    for (const name of names) {
      const times = listings(c.gh, name);
      const gaps = times.slice(1).map((t, i) => t - (times[i] ?? 0));
      // A scan is due only once its interval has passed since the last one ended, judged by
      // the database clock (this host's), and a listing happens after its claim: so no two
      // listings of a remote, by any replica, come closer than the interval.
      for (const gap of gaps)
        expect(gap, `${name}: listed at ${times.join(", ")}`).toBeGreaterThanOrEqual(9_990);
    }
  }, 120_000);
});
