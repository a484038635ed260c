import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { GitHubClients } from "../../src/github/client.js";
import { TokenBucket } from "../../src/github/token-bucket.js";
import { listStoredAssets } from "../../src/store/assets.js";
import { sql } from "../../src/store/port.js";
import { getSyncState } from "../../src/store/sync-lease.js";
import { runSync, type SyncDeps } from "../../src/sync/sync-job.js";
import { FakeClock } from "../github/fake-clock.js";
import { DIALECTS, useFreshDatabase } from "../store/harness.js";
import { FakeGitHub, secondaryRateLimitFault } from "../support/fake-github.js";
import { corpusRpm, newRemote, syncDeps } from "./harness.js";

const archer = corpusRpm("Archer-3.4.5-6.x86_64.rpm");
const rimmer = corpusRpm("Rimmer-1.0.2-2.x86_64.rpm");

let gh: FakeGitHub;
beforeAll(async () => {
  gh = await FakeGitHub.start();
});
afterAll(async () => {
  await gh.close();
});

/**
 * Deps whose GitHub client announces its first request to the CDN: the explicit signal that the
 * scan is now inside an asset read (which the fake holds open).
 */
function depsWithCdnSignal(base: SyncDeps): { deps: SyncDeps; atCdn: Promise<void> } {
  let reached: () => void = () => undefined;
  const atCdn = new Promise<void>((resolve) => {
    reached = resolve;
  });
  return {
    atCdn,
    deps: {
      ...base,
      client: (url, token) => {
        const c = base.client(url, token);
        return {
          ...c,
          fetch: (input, init) => {
            if (String(input).startsWith(gh.cdnUrl)) reached();
            return c.fetch(input, init);
          },
        };
      },
    },
  };
}

describe.each(DIALECTS)("the sync job's lease on %s", (dialect) => {
  const t = useFreshDatabase(dialect);

  async function hungRemote() {
    const { owner, repo, name } = await newRemote(t.db(), gh);
    gh.addRelease(owner, repo, {
      tag: "v1",
      assets: [
        { name: "a.rpm", content: archer },
        { name: "b.rpm", content: rimmer },
      ],
    });
    gh.fault({ target: "cdn", status: 200, hang: true });
    return name;
  }

  it("renews the lease while a long scan runs, and a shutdown ends it with the lease released", async () => {
    const name = await hungRemote();
    const clock = new FakeClock();
    const { deps, atCdn } = depsWithCdnSignal(syncDeps(t.db(), gh, { clock }));
    const stop = new AbortController();
    const job = runSync(deps, name, { prime: true, signal: stop.signal });
    await atCdn;
    // Make the lease look expired; only a renewal can bring it back into the future.
    await t
      .db()
      .exec(
        sql("update github_rpm_sync_state set sync_lease_expires = 0 where remote_name = $1", name),
      );
    await clock.advance(30_000);
    await vi.waitFor(async () => {
      const s = await getSyncState(t.db(), name);
      expect(s?.leaseLive).toBe(true);
    });

    stop.abort();
    const report = await job;
    expect(report).toMatchObject({ status: "error", summary: { read: 0, deferred: 2 } });
    const state = await getSyncState(t.db(), name);
    expect(state).toMatchObject({ leaseOwner: null, lastResult: "error" });
  });

  it("commits nothing when the lease passed to another process mid-scan", async () => {
    const name = await hungRemote();
    const clock = new FakeClock();
    const { deps, atCdn } = depsWithCdnSignal(syncDeps(t.db(), gh, { clock }));
    const job = runSync(deps, name, { prime: true });
    await atCdn;
    // Our lease expired and another replica took it over.
    await t
      .db()
      .exec(
        sql(
          "update github_rpm_sync_state set sync_lease_owner = 'replica-b' where remote_name = $1",
          name,
        ),
      );
    await clock.advance(30_000);
    const report = await job;
    expect(report.status).toBe("error");
    expect(report.status === "error" && report.error).toMatch(/passed to another process/);
    expect(await listStoredAssets(t.db(), name)).toEqual([]);
    expect(await getSyncState(t.db(), name)).toMatchObject({ leaseOwner: "replica-b" });
  });

  it("ends at once on shutdown while the listing waits out a secondary rate limit", async () => {
    const { owner, repo, name } = await newRemote(t.db(), gh);
    gh.addRelease(owner, repo, { tag: "v1", assets: [{ name: "a.rpm", content: archer }] });
    // Two minutes of retry-after, in real seconds: longer than this test may take.
    gh.fault({ ...secondaryRateLimitFault(120), path: /\/releases$/ });
    let limited: () => void = () => undefined;
    const answered = new Promise<void>((resolve) => {
      limited = resolve;
    });
    // The client says when GitHub's limit answer arrived and its wait began: the explicit signal.
    const clients = new GitHubClients({
      bucket: new TokenBucket({ rate: 100_000, burst: 100_000 }),
      retry: { retryAfterUnitMs: 1000 },
      logger: {
        warn: (_o, msg) => {
          if (msg === "GitHub rate limit answered") limited();
        },
        debug: () => undefined,
      },
    });
    const deps: SyncDeps = {
      ...syncDeps(t.db(), gh, { clock: new FakeClock() }),
      client: (url, token) => clients.get(url, token),
    };
    const stop = new AbortController();
    const job = runSync(deps, name, { prime: true, signal: stop.signal });
    await answered;
    stop.abort();
    const report = await job;
    expect(report).toMatchObject({ status: "error" });
    expect(report.status === "error" && report.error).toMatch(/stopped/);
    expect(await getSyncState(t.db(), name)).toMatchObject({
      leaseOwner: null,
      lastResult: "error",
    });
  });
});
