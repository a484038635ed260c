import { createHash } from "node:crypto";
import { ReposyncError } from "../../src/errors.js";
import { createGitHubClient } from "../../src/github/client.js";
import type { Clock } from "../../src/github/clock.js";
import { TokenBucket } from "../../src/github/token-bucket.js";
import type { ContentStore } from "../../src/packages/content-store.js";
import {
  type FetchLeases,
  type FetchLeaseWaitKind,
  fetchLeasesFor,
} from "../../src/packages/fetch-lease.js";
import { type FetchUpstream, PackageCache } from "../../src/packages/package-cache.js";
import { createGitHubUpstream, type GitHubPackage } from "../../src/packages/upstream.js";
import type { Database, Queryable, Row, Statement } from "../../src/store/port.js";
import { Countdown } from "./deferred.js";

export const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** A public GitHub asset whose download URL is `url` (a server on 127.0.0.1). */
export function packageAt(url: string, bytes: Uint8Array, assetId = 7): GitHubPackage {
  return {
    sha256: sha(bytes),
    size: bytes.length,
    assetId,
    name: `pkg-${assetId}.rpm`,
    browserDownloadUrl: url,
    url: `http://127.0.0.1:9/api/v3/repos/o/r/releases/assets/${assetId}`,
    access: "browser",
  };
}

/** The real upstream: src/github's bucketed fetch, through createGitHubUpstream. */
export function realUpstream(): FetchUpstream<GitHubPackage> {
  const client = createGitHubClient({
    baseUrl: "http://127.0.0.1:9/api/v3",
    bucket: new TokenBucket({ rate: 1000, burst: 1000 }),
    retry: { maxTransientRetries: 0 },
  });
  return createGitHubUpstream({ clientFor: () => client });
}

/** Which lease statement of src/store/fetch-lease.ts a statement is, told from its text. */
export type LeaseStatement = "acquire" | "renew" | "release" | "markFailed" | "read" | "reclaim";

const LEASE_STATEMENTS: readonly LeaseStatement[] = [
  "acquire",
  "renew",
  "release",
  "markFailed",
  "read",
  "reclaim",
];

export function leaseStatementOf(text: string): LeaseStatement | undefined {
  const t = text.trim();
  if (!t.includes("fetch_leases")) return undefined;
  if (t.startsWith("insert")) return "acquire";
  if (t.includes("set failed = true")) return "markFailed";
  if (t.startsWith("update")) return "renew";
  if (t.startsWith("select")) return "read";
  if (t.includes("where key")) return "release";
  return "reclaim";
}

/**
 * The real database seen through a counting port: every statement that reaches it is recorded
 * (`issued`), each lease statement bumps its countdown once it has finished (so a test can wait
 * for "the renewal has run"), and `breakLeases` makes lease statements throw DB_ERROR as a
 * database refusing them would.
 */
export class CountingDatabase implements Database {
  readonly issued: string[] = [];
  readonly finished = Object.fromEntries(
    LEASE_STATEMENTS.map((k) => [k, new Countdown()]),
  ) as Record<LeaseStatement, Countdown>;
  breakLeases = false;

  constructor(readonly inner: Database) {}

  get dialect() {
    return this.inner.dialect;
  }
  get target() {
    return this.inner.target;
  }
  get schema() {
    return this.inner.schema;
  }

  /** Lease statements issued so far, by kind (all kinds when none is given). */
  leaseQueries(kind?: LeaseStatement): number {
    return this.issued.filter((t) => {
      const k = leaseStatementOf(t);
      return k !== undefined && (kind === undefined || k === kind);
    }).length;
  }

  query<T extends Row = Row>(s: Statement): Promise<T[]> {
    return this.counted(s, () => this.inner.query<T>(s));
  }
  exec(s: Statement): Promise<number> {
    return this.counted(s, () => this.inner.exec(s));
  }
  runScript(text: string): Promise<void> {
    return this.inner.runScript(text);
  }
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.inner.transaction(fn);
  }
  close(): Promise<void> {
    return this.inner.close();
  }

  private async counted<R>(s: Statement, run: () => Promise<R>): Promise<R> {
    this.issued.push(s.text);
    const kind = leaseStatementOf(s.text);
    try {
      if (kind && this.breakLeases) {
        throw new ReposyncError("DB_ERROR", "database error (test): lease statements refused");
      }
      return await run();
    } finally {
      if (kind) this.finished[kind].bump();
    }
  }
}

/** One "replica": its own pool (a CountingDatabase), lease owner, clock and cache. */
export interface Replica {
  readonly name: string;
  readonly db: CountingDatabase;
  readonly leases: FetchLeases | undefined;
  readonly cache: PackageCache<GitHubPackage>;
  /** How its waits on other replicas ended, in order. */
  readonly waits: FetchLeaseWaitKind[];
  readonly warnings: { obj: object; msg: string }[];
  readonly upstreamFetches: Countdown;
  readonly coalescedWaits: Countdown;
}

/**
 * A replica as the daemon wires one: fetchLeasesFor decides whether there are leases at all,
 * and the cache gets their acquire step only then. `leaseClock` paces polls and renewals (a
 * FakeClock in tests); the cache's own fetch timeout runs on the real clock, untouched.
 */
export function replica(options: {
  name: string;
  db: Database;
  store: ContentStore;
  leaseClock?: Clock;
  fetchUpstream?: FetchUpstream<GitHubPackage>;
  useLeases?: boolean;
}): Replica {
  const db = new CountingDatabase(options.db);
  const waits: FetchLeaseWaitKind[] = [];
  const warnings: { obj: object; msg: string }[] = [];
  const leases =
    options.useLeases === false
      ? undefined
      : fetchLeasesFor({
          db,
          owner: `replica-${options.name}`,
          ...(options.leaseClock ? { clock: options.leaseClock } : {}),
          logger: { warn: (obj, msg) => warnings.push({ obj, msg }) },
          onWait: (kind) => waits.push(kind),
        });
  const upstreamFetches = new Countdown();
  const coalescedWaits = new Countdown();
  const cache = new PackageCache<GitHubPackage>({
    store: options.store,
    fetchUpstream: options.fetchUpstream ?? realUpstream(),
    ...(leases ? { acquire: leases.acquire } : {}),
    metrics: { upstreamFetch: upstreamFetches.bump, coalescedWait: coalescedWaits.bump },
  });
  return {
    name: options.name,
    db,
    leases,
    cache,
    waits,
    warnings,
    upstreamFetches,
    coalescedWaits,
  };
}

/** The lease rows left in the database. */
export async function leaseRows(db: Queryable): Promise<Row[]> {
  return db.query({ text: "select key, owner, expires_at, failed from fetch_leases", values: [] });
}
