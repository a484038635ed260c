import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import type { FastifyInstance } from "fastify";
import { systemClock } from "../../src/github/clock.js";
import { ContentStore } from "../../src/packages/content-store.js";
import { PackageCache } from "../../src/packages/package-cache.js";
import { createGitHubUpstream } from "../../src/packages/upstream.js";
import { buildServer, type ServerDeps } from "../../src/server/build-server.js";
import { ServerMetrics } from "../../src/server/metrics.js";
import { githubPackageSource, type RemotePackage } from "../../src/server/package-source.js";
import type { Database } from "../../src/store/port.js";
import type { NewRemote } from "../../src/store/remote-input.js";
import { runSync } from "../../src/sync/sync-job.js";
import { Countdown } from "../packages/deferred.js";
import type { FakeGitHub } from "../support/fake-github.js";
import { fixtureRpm } from "../support/fixtures.js";
import { newRemote, syncDeps } from "../sync/harness.js";

/** Fixture RPMs a synced test remote carries. */
export const FIXTURES = [
  "fx-noarch-2.5-3.noarch.rpm",
  "fx-files-1.0-1.x86_64.rpm",
  "fx-bighdr-1.0-1.x86_64.rpm",
] as const;

/** A remote on the fake GitHub, synced once: its name and its assets by file name. */
export interface SyncedRemote {
  readonly name: string;
  readonly owner: string;
  readonly repo: string;
  readonly assets: Map<string, { id: number; bytes: Buffer }>;
}

/** Creates a remote with the fixture RPMs as assets of one release and syncs it for real. */
export async function syncedRemote(
  db: Database,
  gh: FakeGitHub,
  remote: Partial<NewRemote> = {},
  options: { private?: boolean } = {},
): Promise<SyncedRemote> {
  const { owner, repo, name } = await newRemote(db, gh, { remote, ...options });
  const files = FIXTURES.map((f) => ({ name: f, content: readFileSync(fixtureRpm(f)) }));
  const release = gh.addRelease(owner, repo, { tag: "v1", assets: files });
  const report = await runSync(syncDeps(db, gh, { clock: systemClock }), name, { prime: true });
  if (report.status !== "ok") throw new Error(`sync failed: ${JSON.stringify(report)}`);
  const assets = new Map<string, { id: number; bytes: Buffer }>();
  files.forEach((f, i) => {
    assets.set(f.name, { id: release.assetIds[i] ?? 0, bytes: f.content });
  });
  return { name, owner, repo, assets };
}

/** A server over `db` with a real package cache in a temporary folder. */
export interface TestServer {
  readonly app: FastifyInstance;
  readonly metrics: ServerMetrics;
  readonly cache: PackageCache<RemotePackage>;
  readonly store: ContentStore;
  /** Remotes the server asked the (absent) syncer to prime, in order. */
  readonly primes: string[];
  /** Bumped at each prime asked for: the signal that a request is in its cold wait. */
  readonly primed: Countdown;
  /** Bumped at each package cache miss: the signal that a request waits for a download. */
  readonly misses: Countdown;
  /** Calls the server's "a sync of this remote ended" listeners (with its error, if it failed). */
  synced(remote: string, failure?: string): void;
  close(): Promise<void>;
}

/**
 * Builds the server the daemon would, minus the syncer: primes are recorded, and the package
 * cache downloads through the real GitHub upstream, with a client of the fake GitHub.
 */
export async function testServer(
  db: Database,
  gh: FakeGitHub,
  overrides: Partial<ServerDeps> = {},
): Promise<TestServer> {
  const dir = await mkdtemp(path.join(tmpdir(), "reposync-server-"));
  const store = new ContentStore({ root: path.join(dir, "packages") });
  const metrics = overrides.metrics ?? new ServerMetrics();
  const deps = syncDeps(db, gh, { clock: systemClock });
  const clientFor = () => deps.client(gh.apiUrl, gh.token);
  const misses = new Countdown();
  const cache = new PackageCache<RemotePackage>({
    store,
    fetchUpstream: createGitHubUpstream<RemotePackage>({ clientFor }),
    metrics: {
      ...metrics.packageCache,
      miss: () => {
        metrics.packageCache.miss?.();
        misses.bump();
      },
    },
    stopGraceMs: 0,
  });
  await cache.start();
  const primes: string[] = [];
  const primed = new Countdown();
  const listeners: ((remote: string, failure?: string) => void)[] = [];
  const app = buildServer({
    db,
    packages: githubPackageSource({ cache, clientFor }),
    metrics,
    enqueuePrime: (remote) => {
      primes.push(remote);
      primed.bump();
    },
    onSynced: (l) => listeners.push(l),
    coldWaitMs: 10_000,
    ...overrides,
  });
  await app.ready();
  return {
    app,
    metrics,
    cache,
    store,
    primes,
    primed,
    misses,
    synced: (remote, failure) => {
      for (const l of listeners) l(remote, failure);
    },
    close: async () => {
      // fetch() leaves an aborted request's socket open until its keep-alive timeout, and
      // close() would wait for it; these tests are not about draining (see the daemon's).
      const closing = app.close();
      app.server.closeAllConnections();
      await closing;
      await cache.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
