import { GitHubClients, type GitHubLogger } from "../github/client.js";
import { type Clock, systemClock } from "../github/clock.js";
import { TokenBucket } from "../github/token-bucket.js";
import type { Database } from "../store/port.js";
import type { Remote } from "../store/remote-input.js";
import { newOwnerId } from "./owner-id.js";
import type { SyncDeps, SyncLogger } from "./sync-job.js";

/** The settings a syncing process is built from (a subset of Config). */
export interface SyncSettings {
  readonly githubApiUrl: string;
  readonly githubSyncRate: number;
  readonly githubSyncBurst: number;
}

/** Inputs of createSyncDeps. */
export interface CreateSyncDepsOptions {
  readonly db: Database;
  readonly settings: SyncSettings;
  readonly tokenFor: (remote: Remote) => string | undefined;
  readonly clock?: Clock;
  readonly logger?: SyncLogger & GitHubLogger;
  readonly owner?: string;
}

/**
 * Builds what sync jobs share in one process: one token bucket (every GitHub request of every
 * remote takes from it, so GITHUB_SYNC_RATE holds for the process as a whole), one GitHub client
 * per credential, and one lease owner id. Also returns the bucket, for status and metrics.
 */
export function createSyncDeps(options: CreateSyncDepsOptions): {
  deps: SyncDeps;
  bucket: TokenBucket;
} {
  const clock = options.clock ?? systemClock;
  const bucket = new TokenBucket({
    rate: options.settings.githubSyncRate,
    burst: options.settings.githubSyncBurst,
    clock,
  });
  const clients = new GitHubClients({
    bucket,
    clock,
    ...(options.logger ? { logger: options.logger } : {}),
  });
  return {
    bucket,
    deps: {
      db: options.db,
      client: (baseUrl, token) => clients.get(baseUrl, token),
      defaultApiUrl: options.settings.githubApiUrl,
      tokenFor: options.tokenFor,
      owner: options.owner ?? newOwnerId(),
      clock,
      ...(options.logger ? { logger: options.logger } : {}),
    },
  };
}
