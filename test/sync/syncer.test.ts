import { describe, expect, it } from "vitest";
import type { SyncWork } from "../../src/store/sync-requests.js";
import { type SyncJob, SyncQueue } from "../../src/sync/job-queue.js";
import type { SyncReport } from "../../src/sync/sync-job.js";
import { Syncer } from "../../src/sync/syncer.js";
import { FakeClock, settle } from "../github/fake-clock.js";

interface Deferred<T> {
  promise: Promise<T>;
  resolve: (v: T) => void;
}
function deferred<T>(): Deferred<T> {
  let resolve: (v: T) => void = () => undefined;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/**
 * A job runner the test drives: each job announces its start, then waits until the test
 * finishes it (or the syncer's signal aborts it).
 */
class HeldJobs {
  readonly started: SyncJob[] = [];
  readonly aborted: string[] = [];
  private readonly finishers = new Map<string, () => void>();
  private onStart: (() => void)[] = [];
  running = 0;
  maxRunning = 0;

  run = async (job: SyncJob, signal: AbortSignal): Promise<SyncReport> => {
    this.started.push(job);
    this.running++;
    this.maxRunning = Math.max(this.maxRunning, this.running);
    for (const w of this.onStart.splice(0)) w();
    const done = deferred<void>();
    this.finishers.set(job.remote, () => done.resolve());
    const onAbort = () => {
      this.aborted.push(job.remote);
      done.resolve();
    };
    signal.addEventListener("abort", onAbort, { once: true });
    await done.promise;
    signal.removeEventListener("abort", onAbort);
    this.running--;
    return { remote: job.remote, status: "ok", summary: null };
  };

  /** Resolves once `n` jobs in all have started. */
  async startedCount(n: number): Promise<void> {
    while (this.started.length < n) {
      await new Promise<void>((resolve) => this.onStart.push(resolve));
    }
  }

  finish(remote: string): void {
    const f = this.finishers.get(remote);
    if (!f) throw new Error(`no running job for ${remote}`);
    this.finishers.delete(remote);
    f();
  }
}

describe("the sync queue", () => {
  it("keeps one pending job per remote however often it is enqueued, merging prime", () => {
    const q = new SyncQueue();
    expect(q.enqueue("a")).toBe(true);
    expect(q.enqueue("a")).toBe(false);
    expect(q.enqueue("a", { prime: true, requestedAt: 5 })).toBe(false);
    expect(q.enqueue("a", { requestedAt: 3 })).toBe(false);
    expect(q.enqueue("b")).toBe(true);
    expect(q.size).toBe(2);
  });

  it("hands out a remote's pending job only after its running job is done", async () => {
    const q = new SyncQueue();
    const signal = new AbortController().signal;
    q.enqueue("a");
    const first = await q.take(signal);
    expect(first).toEqual({ remote: "a", prime: false, requestedAt: null });
    q.enqueue("a", { prime: true, requestedAt: 7 });
    let second: SyncJob | undefined;
    const taking = q.take(signal).then((j) => {
      second = j;
    });
    await settle();
    expect(second).toBeUndefined();
    q.done("a");
    await taking;
    expect(second).toEqual({ remote: "a", prime: true, requestedAt: 7 });
  });
});

describe("the syncer", () => {
  function syncer(
    jobs: HeldJobs,
    clock: FakeClock,
    work: (includeDue: boolean) => SyncWork[],
    calls: boolean[] = [],
    workers = 3,
  ) {
    const reports: SyncReport[] = [];
    const s = new Syncer({
      workers,
      pollIntervalMs: 60_000,
      requestPollMs: 1000,
      clock,
      runJob: jobs.run,
      findWork: async ({ includeDue }) => {
        calls.push(includeDue);
        return work(includeDue);
      },
      onReport: (r) => reports.push(r),
    });
    return { s, reports };
  }

  it("coalesces enqueues of one remote into one job, and runs one more after a mid-run request", async () => {
    const jobs = new HeldJobs();
    const clock = new FakeClock();
    const { s, reports } = syncer(jobs, clock, () => []);
    s.start();
    for (let i = 0; i < 5; i++) s.enqueue("demo");
    await jobs.startedCount(1);
    // Mid-run: many asks, one pending job.
    for (let i = 0; i < 5; i++) s.enqueue("demo", { prime: true });
    expect(s.queue.size).toBe(1);
    jobs.finish("demo");
    await jobs.startedCount(2);
    jobs.finish("demo");
    await s.stop();
    expect(jobs.started.map((j) => [j.remote, j.prime])).toEqual([
      ["demo", false],
      ["demo", true],
    ]);
    expect(reports).toHaveLength(2);
  });

  it("runs at most GITHUB_SYNC_WORKERS jobs at once", async () => {
    const jobs = new HeldJobs();
    const clock = new FakeClock();
    const { s } = syncer(jobs, clock, () => [], [], 3);
    s.start();
    for (const r of ["a", "b", "c", "d", "e"]) s.enqueue(r);
    await jobs.startedCount(3);
    await settle();
    expect(jobs.started.map((j) => j.remote)).toEqual(["a", "b", "c"]);
    jobs.finish("b");
    await jobs.startedCount(4);
    expect(jobs.started.map((j) => j.remote)).toEqual(["a", "b", "c", "d"]);
    expect(jobs.maxRunning).toBe(3);
    await s.stop();
  });

  it("looks for due remotes at start and every poll interval, and for new ones every second", async () => {
    const jobs = new HeldJobs();
    const clock = new FakeClock();
    const calls: boolean[] = [];
    const { s } = syncer(
      jobs,
      clock,
      (includeDue) =>
        includeDue
          ? [{ remote: "due", prime: false, requestedAt: null }]
          : [{ remote: "new", prime: true, requestedAt: null }],
      calls,
    );
    s.start();
    await jobs.startedCount(1);
    expect(jobs.started[0]).toEqual({ remote: "due", prime: false, requestedAt: null });
    await clock.advance(1000);
    await jobs.startedCount(2);
    expect(jobs.started[1]).toEqual({ remote: "new", prime: true, requestedAt: null });
    await clock.advance(58_000);
    expect(calls.filter((c) => c)).toHaveLength(1);
    await clock.advance(1000);
    expect(calls.filter((c) => c)).toHaveLength(2);
    // 60 s: the first look plus 60 one-second polls, two of them with the due remotes.
    expect(calls).toHaveLength(61);
    await s.stop();
  });

  it("stops cleanly: running jobs see the abort and end, pending ones never start, polling ends", async () => {
    const jobs = new HeldJobs();
    const clock = new FakeClock();
    const calls: boolean[] = [];
    const { s } = syncer(jobs, clock, () => [], calls, 1);
    s.start();
    s.enqueue("a");
    s.enqueue("b");
    await jobs.startedCount(1);
    await s.stop();
    expect(jobs.aborted).toEqual(["a"]);
    expect(jobs.started.map((j) => j.remote)).toEqual(["a"]);
    const polls = calls.length;
    await clock.advance(120_000);
    expect(calls).toHaveLength(polls);
    expect(clock.pending).toBe(0);
    await s.stop(); // idempotent
  });
});
