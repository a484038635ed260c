import { findSyncWork } from "../store/sync-requests.js";
import { runSync, type SyncDeps, type SyncReport } from "./sync-job.js";
import { Syncer } from "./syncer.js";

/** The syncer settings of a process (GITHUB_SYNC_WORKERS, GITHUB_SYNC_POLL_INTERVAL). */
export interface SyncerSettings {
  readonly workers: number;
  readonly pollIntervalMs: number;
  readonly requestPollMs?: number;
  readonly onReport?: (report: SyncReport) => void;
}

/**
 * The process's syncer wired to the database and GitHub: jobs are runSync with the shared deps,
 * work comes from findSyncWork. `serve` starts it after migrating and stops it before closing
 * the database.
 */
export function createSyncer(deps: SyncDeps, settings: SyncerSettings): Syncer {
  return new Syncer({
    workers: settings.workers,
    pollIntervalMs: settings.pollIntervalMs,
    ...(settings.requestPollMs !== undefined ? { requestPollMs: settings.requestPollMs } : {}),
    clock: deps.clock,
    runJob: (job, signal) =>
      runSync(deps, job.remote, { prime: job.prime, requestedAt: job.requestedAt, signal }),
    findWork: (options) => findSyncWork(deps.db, options),
    ...(settings.onReport ? { onReport: settings.onReport } : {}),
    ...(deps.logger ? { logger: deps.logger } : {}),
  });
}
