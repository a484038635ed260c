import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { GitHubClients } from "../../src/github/client.js";
import type { Clock } from "../../src/github/clock.js";
import { TokenBucket } from "../../src/github/token-bucket.js";
import type { RetryPolicy } from "../../src/github/with-retries.js";
import type { Database } from "../../src/store/port.js";
import type { NewRemote } from "../../src/store/remote-input.js";
import { addRemote } from "../../src/store/remotes.js";
import { latestSnapshot } from "../../src/store/snapshots.js";
import type { SyncDeps } from "../../src/sync/sync-job.js";
import type { FakeGitHub } from "../support/fake-github.js";
import { plainRemote } from "../support/fixtures.js";
import { CORPUS_DIR } from "../support/tools.js";

/** A corpus RPM's bytes by file name. */
export function corpusRpm(name: string): Buffer {
  return readFileSync(join(CORPUS_DIR, name));
}

export const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/**
 * Sync dependencies against the fake GitHub: a bucket too large to pace anything, and retry
 * waits shrunk (retry-after seconds count as milliseconds) so faults cost no real time.
 */
export function syncDeps(
  db: Database,
  gh: FakeGitHub,
  options: {
    clock: Clock;
    owner?: string;
    token?: string | null;
    retry?: Partial<RetryPolicy>;
  },
): SyncDeps {
  const clients = new GitHubClients({
    bucket: new TokenBucket({ rate: 100_000, burst: 100_000 }),
    retry: { retryAfterUnitMs: 1, backoffBaseMs: 1, maxBackoffMs: 5, ...options.retry },
  });
  const token = options.token === undefined ? gh.token : (options.token ?? undefined);
  return {
    db,
    client: (baseUrl, t) => clients.get(baseUrl, t),
    defaultApiUrl: gh.apiUrl,
    tokenFor: () => token,
    owner: options.owner ?? "test-owner",
    clock: options.clock,
  };
}

let repoCounter = 0;

/** A fresh repo on the fake and a remote for it; the repo name is unique per call. */
export async function newRemote(
  db: Database,
  gh: FakeGitHub,
  options: { private?: boolean; remote?: Partial<NewRemote> } = {},
): Promise<{ owner: string; repo: string; name: string }> {
  const repo = `sync${++repoCounter}-${process.pid}`;
  gh.addRepo({ owner: "acme", repo, ...(options.private ? { private: true } : {}) });
  const name = options.remote?.name ?? repo;
  await addRemote(db, plainRemote(name, `acme/${repo}`, options.remote));
  return { owner: "acme", repo, name };
}

/** One package of a primary.xml: its location, pkgid and file time. */
export interface PrimaryEntry {
  readonly href: string;
  readonly pkgid: string;
  readonly fileTime: number;
  readonly name: string;
}

/** Reads the current snapshot of `remote` back: repomd, and primary.xml's packages. */
export async function readSnapshot(
  db: Database,
  remote: string,
): Promise<{ revision: string; repomd: string; files: string[]; primary: PrimaryEntry[] }> {
  const snap = await latestSnapshot(db, remote);
  if (snap === undefined) throw new Error(`no snapshot for ${remote}`);
  const repomd = snap.repomd.toString("utf8");
  const files = [...repomd.matchAll(/<location href="repodata\/([^"]+)"/g)].map((m) => m[1] ?? "");
  const primaryName = files.find((f) => f.endsWith("-primary.xml.gz"));
  const rows = await db.query<{ bytes: Uint8Array }>({
    text: "select bytes from snapshot_files where remote_name = $1 and name = $2",
    values: [remote, primaryName ?? ""],
  });
  const bytes = rows[0]?.bytes;
  if (bytes === undefined) throw new Error(`snapshot file ${primaryName} is not stored`);
  const xml = gunzipSync(Buffer.from(bytes)).toString("utf8");
  const primary = [...xml.matchAll(/<package type="rpm">([\s\S]*?)<\/package>/g)].map((m) => {
    const body = m[1] ?? "";
    return {
      name: /<name>([^<]*)<\/name>/.exec(body)?.[1] ?? "",
      href: /<location href="([^"]*)"/.exec(body)?.[1] ?? "",
      pkgid: /<checksum type="sha256" pkgid="YES">([0-9a-f]+)<\/checksum>/.exec(body)?.[1] ?? "",
      fileTime: Number(/<time file="(\d+)"/.exec(body)?.[1] ?? Number.NaN),
    };
  });
  return { revision: snap.revision, repomd, files, primary };
}

/** CDN requests for one asset id (ranged reads and downloads alike). */
export function cdnRequestsFor(gh: FakeGitHub, assetId: number): number {
  return gh.seen.filter((s) => s.server === "cdn" && s.path === `/assets/${assetId}`).length;
}
