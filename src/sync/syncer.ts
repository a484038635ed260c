import type { Clock } from "../github/clock.js";
import type { SyncWork } from "../store/sync-requests.js";
import { type SyncJob, SyncQueue } from "./job-queue.js";
import type { SyncLogger, SyncReport } from "./sync-job.js";

/** What the syncer runs and asks; in production runSync and findSyncWork bound to the database. */
export interface SyncerOptions {
  /** GITHUB_SYNC_WORKERS: remotes synced at once by this process (3). */
  readonly workers: number;
  /** GITHUB_SYNC_POLL_INTERVAL: how often due remotes are looked for (60 s). */
  readonly pollIntervalMs: number;
  /**
   * How often new remotes and `reposync sync` requests are looked for (1 s). This is what makes
   * `add-remote` prime within 2 s on a running server, in this process or another: the query is
   * one indexed read, cheap enough every second.
   */
  readonly requestPollMs?: number;
  readonly clock: Clock;
  /** Runs one job; must end soon after `signal` aborts. */
  readonly runJob: (job: SyncJob, signal: AbortSignal) => Promise<SyncReport>;
  /** The remotes that want a sync (findSyncWork). */
  readonly findWork: (options: { includeDue: boolean }) => Promise<SyncWork[]>;
  /** Called after each job, with its report (logs, metrics, tests). */
  readonly onReport?: (report: SyncReport) => void;
  readonly logger?: SyncLogger;
}

const oneLine = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * The background syncer, one per process: a poll loop that enqueues remotes (due ones each
 * poll interval, new and requested ones each second), a deduplicating queue, and a pool of
 * workers. `stop()` aborts the signal every job holds, so each ends at its next safe point
 * (committing what it read and releasing its lease), and resolves when all have.
 */
export class Syncer {
  readonly queue = new SyncQueue();
  private controller: AbortController | undefined;
  private tasks: Promise<void>[] = [];
  private stopping: Promise<void> | undefined;

  constructor(private readonly options: SyncerOptions) {}

  /** Starts the poll loop and the workers; idempotent. */
  start(): void {
    if (this.controller) return;
    const controller = new AbortController();
    this.controller = controller;
    this.stopping = undefined;
    this.tasks = [
      this.pollLoop(controller.signal),
      ...Array.from({ length: Math.max(1, this.options.workers) }, () =>
        this.worker(controller.signal),
      ),
    ];
  }

  /**
   * Enqueues a sync of `remote` (a prime skips the recency gate); coalesces with a pending one.
   * For callers in this process, such as the server on a request for a cold remote.
   */
  enqueue(remote: string, options: { prime?: boolean } = {}): void {
    this.queue.enqueue(remote, options);
  }

  /** Stops everything and waits until running jobs have ended; idempotent. */
  stop(): Promise<void> {
    const controller = this.controller;
    if (!controller) return this.stopping ?? Promise.resolve();
    this.controller = undefined;
    controller.abort();
    this.queue.clear();
    this.stopping = Promise.all(this.tasks).then(() => undefined);
    return this.stopping;
  }

  private async pollLoop(signal: AbortSignal): Promise<void> {
    const { clock, pollIntervalMs } = this.options;
    const requestPollMs = this.options.requestPollMs ?? 1000;
    let nextDueScan = clock.now();
    while (!signal.aborted) {
      const includeDue = clock.now() >= nextDueScan;
      if (includeDue) nextDueScan = clock.now() + pollIntervalMs;
      try {
        const work = await this.options.findWork({ includeDue });
        if (signal.aborted) return;
        for (const w of work) {
          this.queue.enqueue(w.remote, { prime: w.prime, requestedAt: w.requestedAt });
        }
      } catch (err) {
        // A database outage: try again next time rather than end the loop.
        this.options.logger?.warn({ err: oneLine(err) }, "looking for remotes to sync failed");
      }
      try {
        await clock.sleep(requestPollMs, signal);
      } catch {
        return;
      }
    }
  }

  private async worker(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let job: SyncJob;
      try {
        job = await this.queue.take(signal);
      } catch {
        return;
      }
      try {
        const report = await this.options.runJob(job, signal);
        this.options.onReport?.(report);
      } catch (err) {
        // runSync reports failures as results; anything thrown is a bug or a database outage.
        this.options.logger?.warn({ remote: job.remote, err: oneLine(err) }, "sync job threw");
      } finally {
        this.queue.done(job.remote);
      }
    }
  }
}
