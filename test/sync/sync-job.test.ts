import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listFailedAssets } from "../../src/store/assets.js";
import { addRemote, getRemote } from "../../src/store/remotes.js";
import { latestSnapshot } from "../../src/store/snapshots.js";
import { claimSyncLease, getSyncState } from "../../src/store/sync-lease.js";
import { runSync, type SyncDeps } from "../../src/sync/sync-job.js";
import { FakeClock } from "../github/fake-clock.js";
import { DIALECTS, useFreshDatabase } from "../store/harness.js";
import {
  type FakeAssetInput,
  FakeGitHub,
  secondaryRateLimitFault,
} from "../support/fake-github.js";
import { cdnRequestsFor, corpusRpm, newRemote, readSnapshot, sha256, syncDeps } from "./harness.js";

const archer = corpusRpm("Archer-3.4.5-6.x86_64.rpm");
const rimmer = corpusRpm("Rimmer-1.0.2-2.x86_64.rpm");
const bash = corpusRpm("fake_bash-1.1.1-1.x86_64.rpm");
const kernel = corpusRpm("super_kernel-6.0.1-2.x86_64.rpm");
const T1 = "2025-07-01T12:00:00Z";
const T2 = "2025-08-02T08:30:00Z";
const seconds = (iso: string) => Date.parse(iso) / 1000;

let gh: FakeGitHub;
beforeAll(async () => {
  gh = await FakeGitHub.start();
});
afterAll(async () => {
  await gh.close();
});

describe.each(DIALECTS)("the sync job on %s", (dialect) => {
  const t = useFreshDatabase(dialect);
  const clock = () => new FakeClock(Date.parse("2026-01-01T00:00:00Z"));

  /** A fresh remote whose repository has one release, `v1`, carrying `assets`. */
  async function remoteWithV1(
    assets: readonly FakeAssetInput[],
    options: { private?: boolean } = {},
  ): Promise<{ owner: string; repo: string; name: string; v1: { assetIds: number[] } }> {
    const { owner, repo, name } = await newRemote(t.db(), gh, options);
    const v1 = gh.addRelease(owner, repo, { tag: "v1", assets });
    return { owner, repo, name, v1 };
  }

  /** Sync dependencies on this test's database, with a fresh clock unless one is given. */
  const freshDeps = (options: Partial<Parameters<typeof syncDeps>[2]> = {}): SyncDeps =>
    syncDeps(t.db(), gh, { clock: clock(), ...options });

  /** One sync of `name` that runs whatever the remote's interval says. */
  const primeSync = (deps: SyncDeps, name: string) => runSync(deps, name, { prime: true });

  it("primes a remote: every filtered .rpm becomes a package and one snapshot names them", async () => {
    const { owner, repo, name, v1 } = await remoteWithV1([
      { name: "archer.rpm", content: archer, updatedAt: T1 },
      { name: "notes.txt", content: Buffer.from("not a package") },
    ]);
    const v2 = gh.addRelease(owner, repo, {
      tag: "v2",
      assets: [{ name: "rimmer.rpm", content: rimmer, updatedAt: T2 }],
    });
    gh.addRelease(owner, repo, {
      tag: "v3-rc1",
      prerelease: true,
      assets: [{ name: "bash.rpm", content: bash }],
    });
    gh.addRelease(owner, repo, {
      tag: "v4",
      draft: true,
      assets: [{ name: "kernel.rpm", content: kernel }],
    });

    const report = await primeSync(freshDeps(), name);

    expect(report).toMatchObject({ status: "ok", summary: { listed: 2, added: 2, packages: 2 } });
    const snap = await readSnapshot(t.db(), name);
    const archerId = v1.assetIds[0] ?? 0;
    const rimmerId = v2.assetIds[0] ?? 0;
    expect(snap.primary).toEqual([
      {
        name: "Archer",
        href: `packages/${archerId}/archer.rpm`,
        pkgid: sha256(archer),
        fileTime: seconds(T1),
      },
      {
        name: "Rimmer",
        href: `packages/${rimmerId}/rimmer.rpm`,
        pkgid: sha256(rimmer),
        fileTime: seconds(T2),
      },
    ]);
    // The revision comes from the data (the newest asset), not from any clock.
    expect(snap.revision).toBe(String(seconds(T2)));
    const state = await getSyncState(t.db(), name);
    expect(state).toMatchObject({ leaseOwner: null, lastResult: "ok" });
  });

  it("writes the same snapshot bytes for the same release data, whatever the builder's clock", async () => {
    const { name } = await remoteWithV1([
      { name: "a.rpm", content: archer, updatedAt: T1 },
      { name: "b.rpm", content: kernel, updatedAt: T2 },
    ]);
    // A second remote of the same repository, synced a year later by another owner.
    const twin = `${name}-twin`;
    await addRemote(t.db(), { ...(await getRemote(t.db(), name)), name: twin });
    await primeSync(freshDeps(), name);
    const later = new FakeClock(Date.parse("2027-05-05T00:00:00Z"));
    await primeSync(freshDeps({ clock: later, owner: "replica-b" }), twin);
    const a = await latestSnapshot(t.db(), name);
    const b = await latestSnapshot(t.db(), twin);
    expect(a?.createdAt).not.toBe(b?.createdAt);
    expect(a?.repomd.toString()).toBe(b?.repomd.toString());
  });

  it("reads only the new asset on the next sync, and a 304 or a download-count change derives nothing", async () => {
    const { owner, repo, name, v1 } = await remoteWithV1([
      { name: "archer.rpm", content: archer, updatedAt: T1 },
    ]);
    const deps = freshDeps();
    await primeSync(deps, name);
    const first = await latestSnapshot(t.db(), name);

    // Unchanged: every page answers 304, nothing is read, no snapshot is written.
    const quiet = await primeSync(deps, name);
    expect(quiet).toMatchObject({
      status: "ok",
      summary: { notModifiedPages: 1, read: 0, snapshot: null },
    });
    // Download counts moved: a 200 with a new ETag, but no stable field changed.
    gh.bumpDownloadCounts();
    const counted = await primeSync(deps, name);
    expect(counted).toMatchObject({
      status: "ok",
      summary: { notModifiedPages: 0, read: 0, snapshot: null },
    });
    expect((await latestSnapshot(t.db(), name))?.createdAt).toBe(first?.createdAt);
    expect(cdnRequestsFor(gh, v1.assetIds[0] ?? 0)).toBe(1);

    const v2 = gh.addRelease(owner, repo, {
      tag: "v2",
      assets: [{ name: "rimmer.rpm", content: rimmer, updatedAt: T2 }],
    });
    const next = await primeSync(deps, name);
    expect(next).toMatchObject({ status: "ok", summary: { added: 1, read: 1, packages: 2 } });
    expect(cdnRequestsFor(gh, v1.assetIds[0] ?? 0)).toBe(1);
    expect(cdnRequestsFor(gh, v2.assetIds[0] ?? 0)).toBe(1);
    const snap = await readSnapshot(t.db(), name);
    expect(snap.primary.map((p) => p.name)).toEqual(["Archer", "Rimmer"]);
  });

  it("prunes a vanished asset and keeps the old snapshot's files for an hour", async () => {
    const { owner, repo, name, v1 } = await remoteWithV1([
      { name: "archer.rpm", content: archer, updatedAt: T2 },
      { name: "rimmer.rpm", content: rimmer, updatedAt: T1 },
    ]);
    const c = clock();
    const deps = freshDeps({ clock: c });
    await primeSync(deps, name);
    const before = await readSnapshot(t.db(), name);

    gh.removeAsset(owner, repo, v1.assetIds[1] ?? 0);
    await c.advance(60_000);
    const report = await primeSync(deps, name);
    expect(report).toMatchObject({ status: "ok", summary: { removed: 1, packages: 1 } });
    const after = await readSnapshot(t.db(), name);
    expect(after.primary.map((p) => p.name)).toEqual(["Archer"]);
    // The newest file time did not move, yet the revision must name a new snapshot.
    expect(Number(after.revision)).toBe(Number(before.revision) + 1);
    const stored = async () =>
      (
        await t.db().query<{ name: string }>({
          text: "select name from snapshot_files where remote_name = $1",
          values: [name],
        })
      ).map((r) => r.name);
    for (const f of before.files) expect(await stored()).toContain(f);

    // An hour later the next sync that commits drops them.
    await c.advance(3_600_000);
    await primeSync(deps, name);
    const left = await stored();
    for (const f of before.files) expect(left).not.toContain(f);
    for (const f of after.files) expect(left).toContain(f);
  });

  it("re-reads an asset replaced under the same name, by a new id or a new digest", async () => {
    const { owner, repo, name, v1 } = await remoteWithV1([
      { name: "tool.rpm", content: archer, updatedAt: T1 },
    ]);
    const deps = freshDeps();
    await primeSync(deps, name);

    // Same id, new bytes: GitHub's digest and updated_at change.
    const id = v1.assetIds[0] ?? 0;
    gh.replaceAsset(owner, repo, id, { id, content: rimmer, updatedAt: T2 });
    const same = await primeSync(deps, name);
    expect(same).toMatchObject({ status: "ok", summary: { changed: 1, read: 1, packages: 1 } });
    expect((await readSnapshot(t.db(), name)).primary).toEqual([
      {
        name: "Rimmer",
        href: `packages/${id}/tool.rpm`,
        pkgid: sha256(rimmer),
        fileTime: seconds(T2),
      },
    ]);

    // Deleted and uploaded again: a new id under the same name.
    gh.removeAsset(owner, repo, id);
    const again = gh.addRelease(owner, repo, {
      tag: "v1b",
      assets: [{ name: "tool.rpm", content: kernel, updatedAt: T2 }],
    });
    const newId = again.assetIds[0] ?? 0;
    const moved = await primeSync(deps, name);
    expect(moved).toMatchObject({ status: "ok", summary: { changed: 1, read: 1, packages: 1 } });
    expect((await readSnapshot(t.db(), name)).primary).toEqual([
      {
        name: "super_kernel",
        href: `packages/${newId}/tool.rpm`,
        pkgid: sha256(kernel),
        fileTime: seconds(T2),
      },
    ]);
  });

  it("syncs a private repository through the API with the token, and fails without one", async () => {
    const { name } = await remoteWithV1([{ name: "archer.rpm", content: archer, updatedAt: T1 }], {
      private: true,
    });
    const anonymous = await primeSync(freshDeps({ token: null }), name);
    expect(anonymous).toMatchObject({ status: "error" });
    expect(anonymous.status === "error" && anonymous.error).toMatch(/404/);

    const report = await primeSync(freshDeps(), name);
    expect(report).toMatchObject({ status: "ok", summary: { packages: 1 } });
    expect((await readSnapshot(t.db(), name)).primary[0]?.pkgid).toBe(sha256(archer));
    expect(gh.counters.cdnAuthRejected).toBe(0);
  });

  it("reads a private repository's assets through the API after one refused public URL, not one per asset", async () => {
    const { name } = await remoteWithV1(
      [
        { name: "a.rpm", content: archer, updatedAt: T1 },
        { name: "b.rpm", content: rimmer, updatedAt: T1 },
        { name: "c.rpm", content: kernel, updatedAt: T1 },
      ],
      { private: true },
    );
    const browserBefore = gh.counters.browser;
    const report = await primeSync(freshDeps(), name);
    expect(report).toMatchObject({ status: "ok", summary: { packages: 3 } });
    // The first asset tries the public URL (404) and falls back; the next two go to the API.
    expect(gh.counters.browser - browserBefore).toBe(1);
  });

  it("hashes a digest-less asset with one full download, and copes with a CDN that ignores Range", async () => {
    const { name, v1: rel } = await remoteWithV1([
      { name: "old.rpm", content: kernel, digest: null, updatedAt: T1 },
      { name: "new.rpm", content: bash, updatedAt: T1 },
    ]);
    gh.cdnIgnoresRange = true;
    try {
      const report = await primeSync(freshDeps(), name);
      expect(report).toMatchObject({ status: "ok", summary: { packages: 2 } });
    } finally {
      gh.cdnIgnoresRange = false;
    }
    const snap = await readSnapshot(t.db(), name);
    const byName = new Map(snap.primary.map((p) => [p.href, p.pkgid]));
    expect(byName.get(`packages/${rel.assetIds[0]}/old.rpm`)).toBe(sha256(kernel));
    expect(byName.get(`packages/${rel.assetIds[1]}/new.rpm`)).toBe(sha256(bash));
  });

  it("records an asset that is not an RPM with its reason, does not read it again, and keeps the rest", async () => {
    const { owner, repo, name, v1 } = await remoteWithV1([
      {
        name: "broken.rpm",
        content: Buffer.from("this is no rpm at all, just text"),
        updatedAt: T1,
      },
      { name: "archer.rpm", content: archer, updatedAt: T1 },
    ]);
    const deps = freshDeps();
    const report = await primeSync(deps, name);
    expect(report).toMatchObject({ status: "ok", summary: { failed: 1, packages: 1 } });
    const failed = await listFailedAssets(t.db(), name);
    expect(failed.map((f) => f.name)).toEqual(["broken.rpm"]);
    expect(failed[0]?.deriveError).toMatch(/^RPM_/);

    const brokenId = v1.assetIds[0] ?? 0;
    const reads = cdnRequestsFor(gh, brokenId);
    gh.bumpDownloadCounts();
    await primeSync(deps, name);
    expect(cdnRequestsFor(gh, brokenId)).toBe(reads);

    // Fixed upstream: it changes, so it is read again and becomes a package.
    gh.replaceAsset(owner, repo, brokenId, { id: brokenId, content: rimmer, updatedAt: T2 });
    const fixed = await primeSync(deps, name);
    expect(fixed).toMatchObject({ status: "ok", summary: { failed: 0, packages: 2 } });
    expect(await listFailedAssets(t.db(), name)).toEqual([]);
  });

  it("rides out 502s on the listing and the CDN, and a secondary rate limit, losing nothing", async () => {
    const { name, v1 } = await remoteWithV1([
      { name: "a.rpm", content: archer, updatedAt: T1 },
      { name: "b.rpm", content: rimmer, updatedAt: T1 },
    ]);
    gh.fault({ target: "api", path: /\/releases$/, status: 502 });
    gh.fault({ target: "cdn", path: new RegExp(`/assets/${v1.assetIds[1]}$`), status: 502 });
    gh.fault({ ...secondaryRateLimitFault(2), path: /\/releases$/ });
    const faults = () => gh.seen.filter((s) => s.status === 502 || s.status === 403).length;
    const before = faults();
    const report = await primeSync(freshDeps(), name);
    expect(report).toMatchObject({ status: "ok", summary: { packages: 2, deferred: 0 } });
    // All three faults were really answered, and ridden out.
    expect(faults() - before).toBe(3);
  });

  it("keeps what it read when an asset keeps failing, and reads only the rest next time", async () => {
    const { name, v1: rel } = await remoteWithV1([
      { name: "a.rpm", content: archer, updatedAt: T1 },
      { name: "b.rpm", content: rimmer, updatedAt: T1 },
    ]);
    const stubborn = rel.assetIds[1] ?? 0;
    // More 502s in a row than the retry allowance (3 retries after the first attempt).
    for (let i = 0; i < 4; i++) {
      gh.fault({ target: "cdn", path: new RegExp(`/assets/${stubborn}$`), status: 502 });
    }
    const deps = freshDeps();
    const first = await primeSync(deps, name);
    expect(first).toMatchObject({ status: "error", summary: { packages: 1, deferred: 1 } });
    expect(await listFailedAssets(t.db(), name)).toEqual([]);

    const keptReads = cdnRequestsFor(gh, rel.assetIds[0] ?? 0);
    const second = await primeSync(deps, name);
    expect(second).toMatchObject({ status: "ok", summary: { read: 1, packages: 2 } });
    expect(cdnRequestsFor(gh, rel.assetIds[0] ?? 0)).toBe(keptReads);
  });

  it("stops at a primary rate limit mid-scan, commits what it read, and the next sync resumes", async () => {
    const { owner, repo, name } = await remoteWithV1(
      [
        { name: "a.rpm", content: archer, updatedAt: T1 },
        { name: "b.rpm", content: rimmer, updatedAt: T1 },
        { name: "c.rpm", content: kernel, updatedAt: T1 },
      ],
      { private: true },
    );
    const assetPath = `/api/v3/repos/${owner}/${repo}/releases/assets/`;
    const assetCalls = () =>
      gh.seen.filter((s) => s.server === "api" && s.path.startsWith(assetPath)).length;
    // The second private download (an API request) finds the hourly budget spent.
    gh.fault({
      target: "api",
      nth: 2,
      path: /\/releases\/assets\/\d+$/,
      status: 403,
      headers: {
        "x-ratelimit-limit": "5000",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": String(Math.floor(Date.now() / 1000) + 3600),
      },
      body: { message: "API rate limit exceeded for user." },
    });
    // Waiting an hour for the reset is longer than the policy allows: the scan stops.
    const limited = freshDeps({ retry: { maxRateLimitWaitMs: 100 } });
    const first = await primeSync(limited, name);
    expect(first).toMatchObject({
      status: "error",
      summary: { read: 1, deferred: 2, packages: 1 },
    });
    expect(first.status === "error" && first.error).toMatch(/rate limit/i);
    const callsAfterStop = assetCalls();
    expect(callsAfterStop).toBe(2);

    // After the reset (a new process: a new bucket), the sync reads the two left and no more.
    const second = await primeSync(freshDeps(), name);
    expect(second).toMatchObject({ status: "ok", summary: { read: 2, packages: 3 } });
    expect(assetCalls() - callsAfterStop).toBe(2);
    const names = (await readSnapshot(t.db(), name)).primary.map((p) => p.name).sort();
    expect(names).toEqual(["Archer", "Rimmer", "super_kernel"]);
  });

  it("does nothing while another process holds the lease", async () => {
    const { owner, repo, name } = await remoteWithV1([{ name: "a.rpm", content: archer }]);
    const other = await t.open();
    expect(
      await claimSyncLease(other, { remote: name, owner: "replica-b", prime: true }),
    ).toBeDefined();
    const listPath = `/api/v3/repos/${owner}/${repo}/releases`;
    const report = await primeSync(freshDeps(), name);
    expect(report).toEqual({
      remote: name,
      status: "skipped",
      reason: "busy",
      leaseOwner: "replica-b",
    });
    expect(gh.apiRequests(listPath)).toBe(0);
    expect(await latestSnapshot(t.db(), name)).toBeUndefined();
  });

  it("leaves a remote synced within its interval alone unless primed", async () => {
    const { name } = await remoteWithV1([{ name: "a.rpm", content: archer }]);
    const deps = freshDeps();
    expect(await runSync(deps, name)).toMatchObject({ status: "ok" });
    expect(await runSync(deps, name)).toEqual({
      remote: name,
      status: "skipped",
      reason: "not-due",
    });
    expect(await runSync(deps, name, { prime: true })).toMatchObject({ status: "ok" });
  });

  it("writes an empty snapshot for a repository without packages, so the remote is not cold", async () => {
    const { name } = await remoteWithV1([{ name: "notes.txt", content: archer }]);
    const report = await primeSync(freshDeps(), name);
    expect(report).toMatchObject({ status: "ok", summary: { packages: 0 } });
    expect((await readSnapshot(t.db(), name)).primary).toEqual([]);
  });
});
