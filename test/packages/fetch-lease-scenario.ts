import { randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { ContentStore, type StoredPackage } from "../../src/packages/content-store.js";
import type { FetchLeaseWaitKind } from "../../src/packages/fetch-lease.js";
import { openDatabase } from "../../src/store/open-database.js";
import { type Deferred, deferred } from "./deferred.js";
import { leaseRows, packageAt, type Replica, replica, sha } from "./fetch-lease-harness.js";

/** The shape of the seed's measurement, scaled by these numbers. */
export interface ScenarioOptions {
  /** A migrated Postgres database (a schema of its own); every instance opens its own pool. */
  readonly databaseUrl: string;
  /** The one package store folder all instances share. */
  readonly storeRoot: string;
  /** Fetch leases on (as on Postgres) or off (in-process coalescing only). */
  readonly leases: boolean;
  readonly instances?: number;
  readonly packages?: number;
  /** Requests each client keeps in flight. */
  readonly concurrency?: number;
  readonly packageBytes?: number;
  /**
   * Holds each package's download until every instance has looked that package up twice (its
   * miss and its leader's recheck), so that all instances miss it together, as clients started
   * at once do, whatever the machine's timing. Tests want this (the counts are then exact);
   * a bench may turn it off to see free-running numbers.
   */
  readonly lockstep?: boolean;
}

/** What one run counted (the seed's table: upstream fetches and waits on another instance). */
export interface ScenarioCounts {
  readonly requests: number;
  readonly succeeded: number;
  /** Downloads that reached the upstream. */
  readonly upstreamFetches: number;
  /** Waits on another instance's lease, all kinds. */
  readonly leaseWaits: number;
  readonly leaseWaitsByKind: Partial<Record<FetchLeaseWaitKind, number>>;
  /** Lease rows left in the database after the run. */
  readonly leaseRowsAfter: number;
  readonly perInstance: readonly { upstreamFetches: number; leaseWaits: number }[];
}

/** A store that reports each lookup, so the lockstep upstream knows who has missed what. */
class ReportingStore extends ContentStore {
  constructor(
    root: string,
    private readonly onOpen: (sha256: string) => void,
  ) {
    super({ root });
  }

  override async open(sha256: string): Promise<StoredPackage | undefined> {
    const result = await super.open(sha256);
    this.onOpen(sha256);
    return result;
  }
}

/**
 * Three instances (one pool and owner each, one shared store) and three clients, each client
 * through its own instance, each fetching the same packages `concurrency` at a time. The
 * upstream is a real HTTP server on 127.0.0.1 that counts downloads.
 */
export async function runFetchLeaseScenario(options: ScenarioOptions): Promise<ScenarioCounts> {
  const instances = options.instances ?? 3;
  const count = options.packages ?? 30;
  const concurrency = options.concurrency ?? 6;
  const lockstep = options.lockstep ?? true;
  const contents = Array.from({ length: count }, () => randomBytes(options.packageBytes ?? 32_768));
  const digests = contents.map((c) => sha(c));

  // Per package: lookups per instance, and the gate its downloads wait behind.
  const lookups = digests.map(() => new Array<number>(instances).fill(0));
  const gates: Deferred<void>[] = digests.map(() => deferred());
  const noteLookup = (instance: number, sha256: string) => {
    const i = digests.indexOf(sha256);
    const seen = lookups[i];
    if (!seen) return;
    seen[instance] = (seen[instance] ?? 0) + 1;
    if (seen.every((n) => n >= 2)) gates[i]?.resolve();
  };

  let upstreamFetches = 0;
  const server = createServer((req, res) => {
    const i = Number(/^\/p\/(\d+)$/.exec(req.url ?? "")?.[1]);
    const body = contents[i];
    if (!body) {
      res.writeHead(404).end();
      return;
    }
    upstreamFetches++;
    void (lockstep ? gates[i]!.promise : Promise.resolve()).then(() => {
      res.writeHead(200, { "content-length": String(body.length) });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const packages = contents.map((c, i) => packageAt(`${base}/p/${i}`, c, i + 1));

  const replicas: Replica[] = [];
  try {
    for (let n = 0; n < instances; n++) {
      const db = await openDatabase(options.databaseUrl);
      const store = new ReportingStore(options.storeRoot, (s) => noteLookup(n, s));
      replicas.push(replica({ name: String(n), db, store, useLeases: options.leases }));
    }

    let succeeded = 0;
    const client = async (r: Replica) => {
      let next = 0;
      const worker = async () => {
        for (let i = next++; i < count; i = next++) {
          const stored = await r.cache.get(packages[i]!);
          if ((await fileDigest(stored.path)) === digests[i]) succeeded++;
        }
      };
      await Promise.all(Array.from({ length: concurrency }, worker));
    };
    await Promise.all(replicas.map(client));

    const waitsByKind: Partial<Record<FetchLeaseWaitKind, number>> = {};
    for (const kind of replicas.flatMap((r) => r.waits)) {
      waitsByKind[kind] = (waitsByKind[kind] ?? 0) + 1;
    }
    return {
      requests: instances * count,
      succeeded,
      upstreamFetches,
      leaseWaits: replicas.reduce((n, r) => n + r.waits.length, 0),
      leaseWaitsByKind: waitsByKind,
      leaseRowsAfter: (await leaseRows(replicas[0]!.db.inner)).length,
      perInstance: replicas.map((r) => ({
        upstreamFetches: r.upstreamFetches.count,
        leaseWaits: r.waits.length,
      })),
    };
  } finally {
    for (const gate of gates) gate.resolve();
    for (const r of replicas) {
      await r.cache.stop();
      await r.leases?.stop();
      await r.db.close();
    }
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

async function fileDigest(file: string): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of createReadStream(file)) chunks.push(chunk as Buffer);
  return sha(Buffer.concat(chunks));
}
