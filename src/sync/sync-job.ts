import { isReposyncError, ReposyncError } from "../errors.js";
import { diffAssets, selectCandidateAssets } from "../github/candidate-assets.js";
import type { GitHubClient } from "../github/client.js";
import type { Clock } from "../github/clock.js";
import { type ListReleasesResult, listReleases } from "../github/releases.js";
import { listStoredAssets } from "../store/assets.js";
import type { Database } from "../store/port.js";
import type { Remote } from "../store/remote-input.js";
import { findRemote } from "../store/remotes.js";
import { claimSyncLease, getSyncState, releaseSyncLease } from "../store/sync-lease.js";
import { loadListing, type SyncSummary, saveSyncRecord } from "../store/sync-records.js";
import { restoreSyncRequest, takeSyncRequest } from "../store/sync-requests.js";
import { untilAborted } from "../until-aborted.js";
import { type CommitResult, commitSync, type ReadAsset } from "./commit-sync.js";
import { type DeriveOutcome, deriveAsset } from "./derive-asset.js";
import { keepLease } from "./lease-keeper.js";

/** Where a sync job reports; pino's logger fits. */
export interface SyncLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** What a sync job needs; built once per process and shared by every job. */
export interface SyncDeps {
  readonly db: Database;
  /** The GitHub client for an API base URL and token (GitHubClients.get fits). */
  readonly client: (baseUrl: string, token: string | undefined) => GitHubClient;
  /** GITHUB_API_URL: for remotes without an API URL of their own. */
  readonly defaultApiUrl: string;
  /** The token of a remote (its --token-env variable, else GITHUB_TOKEN), or none. */
  readonly tokenFor: (remote: Remote) => string | undefined;
  /** This process's lease owner id, unique among replicas. */
  readonly owner: string;
  readonly clock: Clock;
  /** Changelog entries kept per package in other.xml (10, createrepo_c's default). */
  readonly changelogLimit?: number;
  readonly leaseMs?: number;
  readonly renewMs?: number;
  readonly logger?: SyncLogger;
}

/** Progress of one job: assets read of those to read. */
export interface SyncProgress {
  readonly remote: string;
  readonly read: number;
  readonly total: number;
}

/** Per-job options. */
export interface SyncJobOptions {
  /** Skip the recency gate (new remote, `sync --now`, a request); a live lease still wins. */
  readonly prime?: boolean;
  /**
   * The request mark this job answers (database clock). The job takes it first and skips when
   * another process took it; it is put back when the lease is busy.
   */
  readonly requestedAt?: number | null;
  /** Shutdown: the job ends at the next safe point and still commits what it read. */
  readonly signal?: AbortSignal;
  readonly onProgress?: (progress: SyncProgress) => void;
}

/** How a job ended. */
export type SyncReport =
  | {
      readonly remote: string;
      readonly status: "skipped";
      /**
       * not-due: synced within its interval (or its request was taken by another process);
       * busy: another process holds the lease; missing: the remote was removed.
       */
      readonly reason: "not-due" | "busy" | "missing";
      readonly leaseOwner?: string;
    }
  | {
      readonly remote: string;
      readonly status: "ok" | "error";
      readonly summary: SyncSummary | null;
      readonly error?: string;
    };

const oneLine = (err: unknown) =>
  (err instanceof Error ? err.message : String(err)).replace(/\s+/g, " ").slice(0, 500);

/**
 * Syncs one remote under its lease: lists releases conditionally, diffs the candidate assets
 * with the stored ones by stable fields, reads only new and changed ones, and commits packages,
 * failures, prunes and (when the repodata changed) a new snapshot in one transaction that also
 * releases the lease. Never throws for GitHub or asset trouble: that is an `error` report.
 *
 * A failure or shutdown midway still commits what was read (a rate limit at asset 300 of 500
 * keeps 299 packages); the assets not read are simply not stored, so the next scan finds them
 * missing and reads them then. Nothing is lost, nothing is read twice.
 */
export async function runSync(
  deps: SyncDeps,
  name: string,
  options: SyncJobOptions = {},
): Promise<SyncReport> {
  const { db, owner } = deps;
  const remote = await findRemote(db, name);
  if (remote === undefined) return { remote: name, status: "skipped", reason: "missing" };
  // A request mark is taken before the lease is claimed, so that of several replicas that saw
  // it only one primes (the others would otherwise scan again right after the first).
  const requestedAt = options.requestedAt ?? null;
  if (requestedAt !== null && !(await takeSyncRequest(db, name, requestedAt))) {
    return { remote: name, status: "skipped", reason: "not-due" };
  }
  const claim = await claimSyncLease(db, {
    remote: name,
    owner,
    prime: options.prime === true,
    ...(deps.leaseMs !== undefined ? { leaseMs: deps.leaseMs } : {}),
  });
  if (claim === undefined) {
    if (requestedAt !== null) await restoreSyncRequest(db, name, requestedAt);
    const state = await getSyncState(db, name);
    return state?.leaseLive === true
      ? {
          remote: name,
          status: "skipped",
          reason: "busy",
          ...(state.leaseOwner ? { leaseOwner: state.leaseOwner } : {}),
        }
      : { remote: name, status: "skipped", reason: "not-due" };
  }
  const keeper = keepLease({
    db,
    clock: deps.clock,
    remote: name,
    owner,
    ...(deps.leaseMs !== undefined ? { leaseMs: deps.leaseMs } : {}),
    ...(deps.renewMs !== undefined ? { renewMs: deps.renewMs } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
    onError: (err) =>
      deps.logger?.warn({ remote: name, err: oneLine(err) }, "lease renewal failed"),
  });
  try {
    return await scan(deps, remote, keeper.signal, options);
  } catch (err) {
    // The commit itself failed (database, lost lease): give the lease back if we still can.
    deps.logger?.warn({ remote: name, err: oneLine(err) }, "sync failed");
    await releaseSyncLease(db, name, owner, { result: "error", error: oneLine(err) }).catch(
      () => undefined,
    );
    return { remote: name, status: "error", summary: null, error: oneLine(err) };
  } finally {
    await keeper.stop();
  }
}

async function scan(
  deps: SyncDeps,
  remote: Remote,
  signal: AbortSignal,
  options: SyncJobOptions,
): Promise<SyncReport> {
  const { db, owner } = deps;
  const name = remote.name;
  const client = deps.client(remote.apiUrl ?? deps.defaultApiUrl, deps.tokenFor(remote));
  const budget = () => client.bucket.budget(client.budgetKey);
  const [repoOwner = "", repoName = ""] = remote.repo.split("/");

  let listed: ListReleasesResult;
  try {
    const storedPages = await loadListing(db, name);
    // octokit's throttling waits out a secondary limit without looking at the signal.
    listed = await untilAborted(
      listReleases(client, { owner: repoOwner, repo: repoName, storedPages, signal }),
      signal,
      (s) => new ReposyncError("ABORTED", "stopped while waiting for GitHub", { cause: s.reason }),
    );
  } catch (err) {
    const reason = signal.aborted && isReposyncError(signal.reason) ? signal.reason : err;
    const error = `listing releases of ${remote.repo}: ${oneLine(reason)}`;
    await db.transaction(async (tx) => {
      const b = budget();
      if (b) await saveSyncRecord(tx, name, { budget: b });
      await releaseSyncLease(tx, name, owner, { result: "error", error });
    });
    return { remote: name, status: "error", summary: null, error };
  }

  const candidates = selectCandidateAssets(listed.releases, {
    prereleases: remote.prereleases,
    include: remote.include,
    exclude: remote.exclude,
  });
  const stored = await listStoredAssets(db, name);
  const diff = diffAssets(stored, candidates);
  const toRead = [...diff.added, ...diff.changed.map((c) => c.listed)];
  const removed = new Set(diff.removed.map((s) => s.assetId));
  // A replacement under a new id leaves the old asset behind; under the same id, the upsert
  // overwrites it, unless the new content cannot be read now (see below).
  for (const c of diff.changed) {
    if (c.stored.assetId !== c.listed.assetId) removed.add(c.stored.assetId);
  }
  const changedIds = new Set(diff.changed.map((c) => c.listed.assetId));

  const read: ReadAsset[] = [];
  const deferred: string[] = [];
  let failed = 0;
  let stopped = false;
  // A private repo answers 404 on the public download URL; once one asset needed the API
  // route, the rest go straight to it instead of paying that 404 (and a bucket token) each.
  let access: "auto" | "api" = "auto";
  options.onProgress?.({ remote: name, read: 0, total: toRead.length });
  for (const [i, asset] of toRead.entries()) {
    const outcome: DeriveOutcome | undefined =
      stopped || signal.aborted
        ? undefined
        : await deriveAsset(client, asset, {
            remote: name,
            changelogLimit: deps.changelogLimit ?? 10,
            access,
            signal,
          });
    if (outcome?.kind === "package") {
      read.push({ asset, record: outcome.record });
      if (outcome.record.access === "api") access = "api";
    } else if (outcome?.kind === "failed") {
      failed++;
      read.push({ asset, error: outcome.reason });
      deps.logger?.warn({ remote: name, asset: asset.name, reason: outcome.reason }, "bad asset");
    } else {
      if (outcome?.kind === "deferred") {
        deferred.push(`${asset.name}: ${oneLine(outcome.error)}`);
        stopped ||= outcome.stop;
      }
      // Not read now: a stale package of the same id must not outlive its replaced content.
      if (changedIds.has(asset.assetId)) removed.add(asset.assetId);
    }
    options.onProgress?.({ remote: name, read: i + 1, total: toRead.length });
  }

  const notRead = toRead.length - read.length;
  const interrupted = signal.aborted
    ? isReposyncError(signal.reason)
      ? signal.reason.message
      : "the syncer was stopped"
    : undefined;
  const error =
    notRead === 0
      ? undefined
      : `${notRead} of ${toRead.length} assets left for the next sync (${
          interrupted ?? deferred[0] ?? "stopped"
        })`;
  const result: CommitResult = await commitSync(db, {
    remote: name,
    owner,
    removed: [...removed],
    read,
    unchanged: diff.unchanged,
    listing: listed.pages,
    ...(budget() ? { budget: budget() } : {}),
    outcome: {
      ...(error === undefined ? { result: "ok" } : { result: "error", error }),
      etags: listed.pages.map((p) => p.etag ?? ""),
    },
    summary: {
      pages: listed.fetched,
      notModifiedPages: listed.notModifiedPages,
      listed: candidates.length,
      added: diff.added.length,
      changed: diff.changed.length,
      removed: diff.removed.length,
      read: read.length,
      failed,
      deferred: notRead,
    },
    now: deps.clock.now(),
  });
  deps.logger?.info({ remote: name, ...result.summary }, "synced");
  return {
    remote: name,
    status: error === undefined ? "ok" : "error",
    summary: result.summary,
    ...(error === undefined ? {} : { error }),
  };
}
