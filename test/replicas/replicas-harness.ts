import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { gunzipSync } from "node:zlib";
import pg from "pg";
import { type Element, xml2js } from "xml-js";
import { basicMain, buildRpm } from "../rpm/header-builder.js";
import { reposync, type ServeProcess, startServe } from "../server/cli-process.js";
import { type FakeAssetInput, FakeGitHub } from "../support/fake-github.js";
import { createTestSchema, POSTGRES_URL, type TestSchema } from "../support/postgres.js";

/**
 * Several `reposync serve` processes on one Postgres schema and one data dir (one package
 * folder), with the fake GitHub as upstream: what the replica tests and the bench share.
 */

export const sha256 = (bytes: Uint8Array): string =>
  createHash("sha256").update(bytes).digest("hex");

/**
 * `count` distinct small RPMs (lead, signature, a header naming `<prefix>-<i>`, a payload), so
 * that every asset is its own package with its own digest: the package cache keys on the digest,
 * and copies of one fixture would share one download.
 */
export function rpmAssets(prefix: string, count: number, payloadBytes = 8192): FakeAssetInput[] {
  const width = String(count).length;
  return Array.from({ length: count }, (_, i) => {
    const name = `${prefix}-${String(i).padStart(width, "0")}`;
    return {
      name: `${name}-1.0-1.x86_64.rpm`,
      content: buildRpm({ main: basicMain(name), payload: payloadBytes }).bytes,
      updatedAt: "2025-07-01T12:00:00Z",
    };
  });
}

/**
 * One test's world: a fake GitHub, a Postgres schema of its own, a data dir of its own (the
 * shared package folder), and the replicas started on them; `stop()` removes all of it.
 */
export class ReplicaCluster {
  readonly replicas: ServeProcess[] = [];

  private constructor(
    readonly gh: FakeGitHub,
    readonly schema: TestSchema,
    readonly dataDir: string,
  ) {}

  /** Starts the fake GitHub and makes the schema and a data dir named `<tmpPrefix>XXXXXX`. */
  static async start(tmpPrefix: string): Promise<ReplicaCluster> {
    const gh = await FakeGitHub.start();
    let schema: TestSchema | undefined;
    try {
      schema = await createTestSchema();
      const dataDir = await mkdtemp(path.join(tmpdir(), tmpPrefix));
      return new ReplicaCluster(gh, schema, dataDir);
    } catch (err) {
      await schema?.drop();
      await gh.close();
      throw err;
    }
  }

  /** The environment every replica and CLI call of one test runs with. */
  env(extra: Record<string, string> = {}): Record<string, string> {
    return {
      REPOSYNC_DATABASE: this.schema.url,
      GITHUB_API_URL: this.gh.apiUrl,
      GITHUB_TOKEN: "",
      GITHUB_SYNC_RATE: "1000",
      GITHUB_SYNC_BURST: "1000",
      STATE_DIRECTORY: "",
      REPOSYNC_ADMIN_TOKEN: "",
      REPOSYNC_LOG_LEVEL: "warn",
      ...extra,
    };
  }

  /**
   * Starts `count` more replicas sharing the data dir, each on its own loopback port; adds them
   * to `replicas` as they start (so `stop()` stops them however this ends) and returns them.
   */
  async startReplicas(count: number, env: Record<string, string>): Promise<ServeProcess[]> {
    const started: ServeProcess[] = [];
    for (let i = 0; i < count; i++) {
      const replica = await startServe(
        ["--data-dir", this.dataDir, "--listen", "127.0.0.1:0"],
        env,
      );
      this.replicas.push(replica);
      started.push(replica);
    }
    return started;
  }

  /**
   * Stops every replica still running (SIGKILL: the tests' cleanup, not a behaviour tested),
   * closes the fake GitHub, drops the schema and removes the data dir.
   */
  async stop(): Promise<void> {
    await Promise.all(
      this.replicas.map((r) =>
        r.child.exitCode === null && r.child.signalCode === null
          ? r.stop("SIGKILL")
          : Promise.resolve(null),
      ),
    );
    await this.gh.close();
    await this.schema.drop();
    await rm(this.dataDir, { recursive: true, force: true });
  }
}

/** Runs `reposync ARGS` (the built CLI) against the replicas' database. */
export function cli(args: string[], env: Record<string, string>): Promise<{ stdout: string }> {
  return reposync(args, env);
}

/**
 * Polls `probe` until it returns a value, at most `timeoutMs`; throws naming `what` otherwise.
 * The signal is always what the probe observes (a counter, a row, a response); the pause between
 * probes only spaces them out.
 */
export async function pollUntil<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 30_000,
  everyMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`gave up after ${timeoutMs} ms waiting for ${what}`);
    await delay(everyMs);
  }
}

/** Runs one query on the test Postgres, with the test's schema first on the search path. */
export async function query<R extends Record<string, unknown>>(
  schema: TestSchema,
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    await client.query(`set search_path to ${schema.name}`);
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** The value of one sample of a Prometheus text exposition, 0 when absent. */
export function metricValue(text: string, name: string, labels = ""): number {
  const prefix = labels === "" ? `${name} ` : `${name}{${labels}} `;
  const line = text.split("\n").find((l) => l.startsWith(prefix));
  return line === undefined ? 0 : Number(line.slice(prefix.length));
}

/** The sum of every sample of a metric, whatever its labels. */
export function metricSum(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) {
      sum += Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return sum;
}

/** GETs a URL; resolves with the status and the body bytes. */
export async function getBytes(url: string): Promise<{ status: number; body: Buffer }> {
  const res = await fetch(url);
  return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
}

function elements(el: Element | undefined, name: string): Element[] {
  return (el?.elements ?? []).filter((e) => e.type === "element" && e.name === name);
}

function text(el: Element | undefined): string {
  return String(el?.elements?.find((e) => e.type === "text")?.text ?? "");
}

/** A file a repomd.xml names, with what repomd.xml says about it. */
export interface RepomdEntry {
  readonly type: string;
  readonly href: string;
  readonly checksum: string;
  readonly openChecksum: string;
  readonly size: number;
}

/** The `<data>` entries of a repomd.xml (sha256 checksums, as reposync writes them). */
export function repomdEntries(repomd: string): RepomdEntry[] {
  const root = elements(xml2js(repomd, { compact: false }) as Element, "repomd")[0];
  return elements(root, "data").map((data) => ({
    type: String(data.attributes?.type),
    href: String(elements(data, "location")[0]?.attributes?.href),
    checksum: text(elements(data, "checksum")[0]),
    openChecksum: text(elements(data, "open-checksum")[0]),
    size: Number(text(elements(data, "size")[0])),
  }));
}

/** A package primary.xml lists: where it is served and its sha256. */
export interface PrimaryPackage {
  readonly href: string;
  readonly sha256: string;
}

/** The packages of a gzip'd primary.xml. */
export function primaryPackages(primaryGz: Buffer): PrimaryPackage[] {
  const xml = gunzipSync(primaryGz).toString("utf8");
  const root = elements(xml2js(xml, { compact: false }) as Element, "metadata")[0];
  return elements(root, "package").map((p) => ({
    href: String(elements(p, "location")[0]?.attributes?.href),
    sha256: text(elements(p, "checksum")[0]),
  }));
}

/** GETs `<replica>/<remote>/repodata/repomd.xml` until it answers 200 (a cold remote: 503). */
export function servedRepomd(base: string, remote: string, timeoutMs = 30_000): Promise<Buffer> {
  return pollUntil(
    `${base}/${remote}/repodata/repomd.xml to answer 200`,
    async () => {
      const r = await getBytes(`${base}/${remote}/repodata/repomd.xml`);
      return r.status === 200 ? r.body : undefined;
    },
    timeoutMs,
    100,
  );
}

/** The packages `<replica>/<remote>` serves: those of the primary.xml its repomd.xml names. */
export async function servedPackages(base: string, remote: string): Promise<PrimaryPackage[]> {
  const repomd = (await servedRepomd(base, remote)).toString("utf8");
  const primary = repomdEntries(repomd).find((e) => e.type === "primary");
  const primaryGz = await getBytes(`${base}/${remote}/${primary?.href}`);
  return primaryPackages(primaryGz.body);
}
