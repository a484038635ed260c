import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/github/clock.js";
import { openDatabase } from "../../src/store/open-database.js";
import { claimSyncLease } from "../../src/store/sync-lease.js";
import { createSyncer } from "../../src/sync/create-syncer.js";
import type { SyncReport } from "../../src/sync/sync-job.js";
import { buildCli, runCli } from "../cli/built-cli.js";
import { FakeGitHub } from "../support/fake-github.js";
import { corpusRpm, syncDeps } from "./harness.js";

let gh: FakeGitHub;
let cli: { mainJs: string; remove: () => void };
let dir: string;

beforeAll(async () => {
  gh = await FakeGitHub.start();
  cli = buildCli();
  dir = mkdtempSync(join(tmpdir(), "reposync-sync-cli-"));
});
afterAll(async () => {
  await gh.close();
  cli.remove();
  rmSync(dir, { recursive: true, force: true });
});

describe("reposync sync and status", () => {
  const run = (...args: string[]) =>
    runCli(cli.mainJs, ["--database", join(dir, "reposync.db"), ...args], {
      GITHUB_API_URL: gh.apiUrl,
      GITHUB_TOKEN: gh.token,
      GITHUB_SYNC_RATE: "1000",
      GITHUB_SYNC_BURST: "1000",
    });

  it("syncs here with --now, prints a line per remote, and status shows the result", async () => {
    gh.addRepo({ owner: "acme", repo: "tools" });
    gh.addRelease("acme", "tools", {
      tag: "v1",
      assets: [
        { name: "archer.rpm", content: corpusRpm("Archer-3.4.5-6.x86_64.rpm") },
        { name: "broken.rpm", content: Buffer.from("no rpm here") },
      ],
    });
    expect((await run("add-remote", "tools", "acme/tools")).code).toBe(0);

    // Budget headers large enough that the bucket does not pace these few requests.
    const reset = Math.floor(Date.now() / 1000) + 3600;
    gh.rateLimit = { limit: 5_000_000, remaining: 4_000_000, reset };
    const synced = await run("sync", "--now").finally(() => {
      gh.rateLimit = null;
    });
    expect(synced.stderr).toBe("");
    expect(synced.code).toBe(0);
    expect(synced.stdout).toMatch(/^tools: ok, 1 packages \(2 added, .*1 unreadable\)/m);

    const status = await run("status", "--json");
    expect(status.code).toBe(0);
    const report = JSON.parse(status.stdout) as {
      githubBudgets: { key: string; limit: number; remaining: number; resetAt: number }[];
      remotes: {
        name: string;
        packages: number;
        lastResult: string;
        nextDue: string;
        unreadableAssets: { name: string; reason: string }[];
      }[];
    };
    const tools = report.remotes.find((r) => r.name === "tools");
    expect(tools).toMatchObject({ packages: 1, lastResult: "ok" });
    expect(Date.parse(tools?.nextDue ?? "")).toBeGreaterThan(Date.now());
    expect(tools?.unreadableAssets.map((a) => a.name)).toEqual(["broken.rpm"]);
    expect(report.githubBudgets).toEqual([
      expect.objectContaining({ limit: 5_000_000, resetAt: reset * 1000 }),
    ]);
    expect(report.githubBudgets[0]?.key).not.toContain(gh.token);

    const text = await run("status");
    expect(text.stdout).toMatch(/^tools\s+acme\/tools\s+1\s/m);
    expect(text.stdout).toMatch(/broken\.rpm: RPM_/);
    expect(text.stdout).toMatch(/GitHub budget .* of 5000000 requests left/);
  });

  it("exits 1 naming the remote when a sync fails, and the others still sync", async () => {
    gh.addRepo({ owner: "acme", repo: "fine" });
    gh.addRelease("acme", "fine", {
      tag: "v1",
      assets: [{ name: "rimmer.rpm", content: corpusRpm("Rimmer-1.0.2-2.x86_64.rpm") }],
    });
    expect((await run("add-remote", "fine", "acme/fine")).code).toBe(0);
    expect((await run("add-remote", "ghost", "acme/does-not-exist")).code).toBe(0);
    const r = await run("sync", "--now", "ghost", "fine");
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^ghost: FAILED: .*404/m);
    expect(r.stdout).toMatch(/^fine: ok, 1 packages/m);
    expect(r.stderr).toMatch(/sync failed for ghost/);
  });

  it("does not sync a remote whose lease another process holds, and says who holds it", async () => {
    gh.addRepo({ owner: "acme", repo: "held" });
    expect((await run("add-remote", "held", "acme/held")).code).toBe(0);
    const db = await openDatabase(join(dir, "reposync.db"));
    try {
      await claimSyncLease(db, { remote: "held", owner: "host-b:42:beef", prime: true });
    } finally {
      await db.close();
    }
    const r = await run("sync", "--now", "held");
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/held: not synced, another process is syncing it \(host-b:42:beef\)/);
    expect(gh.apiRequests("/api/v3/repos/acme/held/releases")).toBe(0);
  });

  it("without --now marks the remote for the running service and returns", async () => {
    const before = gh.apiRequests("/api/v3/repos/acme/fine/releases");
    const r = await run("sync", "fine");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/asked for a sync of fine/);
    expect(gh.apiRequests("/api/v3/repos/acme/fine/releases")).toBe(before);
    const status = JSON.parse((await run("status", "--json")).stdout) as {
      remotes: { name: string; syncRequested: boolean; nextDue: string }[];
    };
    expect(status.remotes.find((x) => x.name === "fine")).toMatchObject({
      syncRequested: true,
      nextDue: "now",
    });
    const unknown = await run("sync", "nope");
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no remote named "nope"/);
  });

  it("a remote added with the add-remote command is primed by a running syncer in another process", async () => {
    gh.addRepo({ owner: "acme", repo: "fresh" });
    gh.addRelease("acme", "fresh", {
      tag: "v1",
      assets: [{ name: "archer.rpm", content: corpusRpm("Archer-3.4.5-6.x86_64.rpm") }],
    });
    const db = await openDatabase(join(dir, "reposync.db"));
    let primed: (r: SyncReport) => void = () => undefined;
    const report = new Promise<SyncReport>((resolve) => {
      primed = resolve;
    });
    const syncer = createSyncer(syncDeps(db, gh, { clock: systemClock }), {
      workers: 1,
      pollIntervalMs: 60_000,
      onReport: (r) => {
        if (r.remote === "fresh") primed(r);
      },
    });
    try {
      syncer.start();
      const added = await run("add-remote", "fresh", "acme/fresh");
      expect(added.code).toBe(0);
      expect(await report).toMatchObject({ status: "ok", summary: { packages: 1 } });
    } finally {
      await syncer.stop();
      await db.close();
    }
    const status = JSON.parse((await run("status", "--json")).stdout) as {
      remotes: { name: string; packages: number; lastResult: string }[];
    };
    expect(status.remotes.find((r) => r.name === "fresh")).toMatchObject({
      packages: 1,
      lastResult: "ok",
    });
  });
});
