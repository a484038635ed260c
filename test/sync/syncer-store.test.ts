import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../src/store/port.js";
import { sql } from "../../src/store/port.js";
import { latestSnapshot } from "../../src/store/snapshots.js";
import { claimSyncLease, releaseSyncLease } from "../../src/store/sync-lease.js";
import { findSyncWork, requestSync } from "../../src/store/sync-requests.js";
import { runSync, type SyncReport } from "../../src/sync/sync-job.js";
import { Syncer } from "../../src/sync/syncer.js";
import { FakeClock, settle } from "../github/fake-clock.js";
import { DIALECTS, useFreshDatabase } from "../store/harness.js";
import { FakeGitHub } from "../support/fake-github.js";
import { corpusRpm, newRemote, syncDeps } from "./harness.js";

const archer = corpusRpm("Archer-3.4.5-6.x86_64.rpm");

let gh: FakeGitHub;
beforeAll(async () => {
  gh = await FakeGitHub.start();
});
afterAll(async () => {
  await gh.close();
});

/**
 * A syncer on a real database and the fake GitHub, with explicit signals: each report, and the
 * end of each look for work, resolve what the test waits on.
 */
function instrumentedSyncer(db: Database, clock: FakeClock, owner: string) {
  const deps = syncDeps(db, gh, { clock, owner });
  const reports: SyncReport[] = [];
  const jobs: Promise<SyncReport>[] = [];
  let polls = 0;
  let pollWaiters: { n: number; resolve: () => void }[] = [];
  const reportWaiters: (() => void)[] = [];
  const syncer = new Syncer({
    workers: 2,
    pollIntervalMs: 60_000,
    requestPollMs: 1000,
    clock,
    runJob: (job, signal) => {
      const p = runSync(deps, job.remote, {
        prime: job.prime,
        requestedAt: job.requestedAt,
        signal,
      });
      jobs.push(p);
      return p;
    },
    findWork: async (options) => {
      const work = await findSyncWork(db, options);
      polls++;
      for (const w of pollWaiters.filter((x) => x.n <= polls)) w.resolve();
      pollWaiters = pollWaiters.filter((x) => x.n > polls);
      return work;
    },
    onReport: (r) => {
      reports.push(r);
      for (const w of reportWaiters.splice(0)) w();
    },
  });
  return {
    syncer,
    reports,
    jobs,
    /** Resolves once `n` looks for work have completed in all. */
    polled: (n: number) =>
      polls >= n
        ? Promise.resolve()
        : new Promise<void>((resolve) => pollWaiters.push({ n, resolve })),
    get polls() {
      return polls;
    },
    /** Resolves once `n` reports have arrived in all. */
    async reported(n: number) {
      while (reports.length < n) await new Promise<void>((r) => reportWaiters.push(r));
    },
  };
}

describe.each(DIALECTS)("the syncer on %s", (dialect) => {
  const t = useFreshDatabase(dialect);

  /** A new remote, added on `db`, whose one release holds one package. */
  async function remoteWithOneRelease(db: Database) {
    const { owner, repo, name } = await newRemote(db, gh);
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "a.rpm", content: archer }] });
    return { name, listPath: `/api/v3/repos/${owner}/${repo}/releases` };
  }

  /** remoteWithOneRelease, synced once with a prime just now: nothing is due on it. */
  async function primedRemote(clock: FakeClock) {
    const remote = await remoteWithOneRelease(t.db());
    await runSync(syncDeps(t.db(), gh, { clock }), remote.name, { prime: true });
    return remote;
  }

  /** Replica A's syncer, started on the test's database, once its first look for work is done. */
  async function startedSyncer(clock: FakeClock) {
    const s = instrumentedSyncer(t.db(), clock, "replica-a");
    s.syncer.start();
    await s.polled(1);
    return s;
  }

  /**
   * Two processes' syncers, A on the test's database and B on a connection of its own, both
   * started and past their first look for work.
   */
  async function twoStartedSyncers(clock: FakeClock) {
    const a = instrumentedSyncer(t.db(), clock, "replica-a");
    const b = instrumentedSyncer(await t.open(), clock, "replica-b");
    a.syncer.start();
    b.syncer.start();
    await Promise.all([a.polled(1), b.polled(1)]);
    return {
      /** Waits for both to finish look `n`, then for every job either started: their reports. */
      async reportsAfterPoll(n: number) {
        await Promise.all([a.polled(n), b.polled(n)]);
        await settle();
        return Promise.all([...a.jobs, ...b.jobs]);
      },
      stop: () => Promise.all([a.syncer.stop(), b.syncer.stop()]),
    };
  }

  it("primes a remote added while it runs at its next one-second poll", async () => {
    const clock = new FakeClock();
    const s = await startedSyncer(clock);
    // As `add-remote` does from another process: a row, nothing else.
    const { name } = await remoteWithOneRelease(await t.open());
    expect(await latestSnapshot(t.db(), name)).toBeUndefined();

    await clock.advance(1000);
    await s.reported(1);
    expect(s.reports[0]).toMatchObject({ remote: name, status: "ok", summary: { packages: 1 } });
    expect(await latestSnapshot(t.db(), name)).toBeDefined();
    await s.syncer.stop();
  });

  it("answers a `reposync sync` request mark with a prime and clears it", async () => {
    const clock = new FakeClock();
    const { name, listPath } = await primedRemote(clock);
    const listed = gh.apiRequests(listPath);

    const s = await startedSyncer(clock);
    // Synced a moment ago and not due: the first look found nothing to do.
    expect(s.jobs).toHaveLength(0);

    await requestSync(await t.open(), [name]);
    await clock.advance(1000);
    await s.reported(1);
    expect(s.reports[0]).toMatchObject({ remote: name, status: "ok" });
    expect(gh.apiRequests(listPath)).toBe(listed + 1);
    expect(await findSyncWork(t.db(), { includeDue: false })).toEqual([]);
    await s.syncer.stop();
  });

  it("syncs a new remote once when two processes poll for it, whichever wins the lease", async () => {
    const clock = new FakeClock();
    const syncers = await twoStartedSyncers(clock);
    const { listPath } = await remoteWithOneRelease(t.db());

    await clock.advance(1000);
    const reports = await syncers.reportsAfterPoll(2);
    const ok = reports.filter((r) => r.status === "ok");
    expect(ok).toHaveLength(1);
    // The loser, if it got as far as a job, found the lease taken or the remote fresh.
    for (const r of reports.filter((x) => x.status !== "ok")) {
      expect(r).toMatchObject({ status: "skipped" });
    }
    expect(gh.apiRequests(listPath)).toBe(1);
    await syncers.stop();
  });

  it("answers one request with one scan when two processes see it", async () => {
    const clock = new FakeClock();
    const { name, listPath } = await primedRemote(clock);
    const listed = gh.apiRequests(listPath);
    const syncers = await twoStartedSyncers(clock);

    await requestSync(t.db(), [name]);
    await clock.advance(1000);
    const reports = await syncers.reportsAfterPoll(2);
    expect(reports.filter((r) => r.status === "ok")).toHaveLength(1);
    expect(gh.apiRequests(listPath)).toBe(listed + 1);
    await syncers.stop();
  });

  it("puts a request back when the lease is busy, and answers it once the lease is free", async () => {
    const clock = new FakeClock();
    const { name } = await primedRemote(clock);
    await claimSyncLease(t.db(), { remote: name, owner: "replica-b", prime: true });
    await requestSync(t.db(), [name]);
    const [work] = await findSyncWork(t.db(), { includeDue: false });
    // findSyncWork leaves out remotes whose lease is live; a job may still meet one.
    expect(work).toBeUndefined();
    const requestedAt = (
      await t
        .db()
        .query<{ at: number }>(
          sql("select sync_requested_at as at from remotes where name = $1", name),
        )
    )[0]?.at;
    const deps = syncDeps(t.db(), gh, { clock });
    const busy = await runSync(deps, name, { prime: true, requestedAt: Number(requestedAt) });
    expect(busy).toMatchObject({ status: "skipped", reason: "busy" });
    await releaseSyncLease(t.db(), name, "replica-b", { result: "ok" });
    expect(await findSyncWork(t.db(), { includeDue: false })).toEqual([
      { remote: name, prime: true, requestedAt: Number(requestedAt) },
    ]);
    const done = await runSync(deps, name, { prime: true, requestedAt: Number(requestedAt) });
    expect(done).toMatchObject({ status: "ok" });
    expect(await findSyncWork(t.db(), { includeDue: false })).toEqual([]);
  });
});
