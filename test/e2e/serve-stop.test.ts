import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basicMain, buildRpm } from "../rpm/header-builder.js";
import { CLI, ensureBuilt, reposync, startServe } from "../server/cli-process.js";
import { FakeGitHub } from "../support/fake-github.js";
import { stalledGet } from "../support/stalled-get.js";

const run = promisify(execFile);

describe("reposync serve as a process: bad settings and signals", () => {
  let gh: FakeGitHub;
  let work: string;

  beforeAll(async () => {
    ensureBuilt();
    gh = await FakeGitHub.start();
    work = await mkdtemp(path.join(tmpdir(), "reposync-e2e-stop-"));
  }, 120_000);

  afterAll(async () => {
    await gh?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("refuses bad settings with exit status 2 and one line naming each, before listening", async () => {
    const res = await run(
      process.execPath,
      [
        CLI,
        "serve",
        "--data-dir",
        path.join(work, "bad"),
        "--listen",
        "nowhere",
        "--cold-wait",
        "soon",
      ],
      { env: { ...process.env, GITHUB_SYNC_RATE: "-1" } },
    ).then(
      () => ({ code: 0, stderr: "" }),
      (err: { code?: number; stderr?: string }) => ({ code: err.code, stderr: err.stderr ?? "" }),
    );
    expect(res.code).toBe(2);
    const lines = res.stderr.split("\n").filter((l) => l !== "");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("--listen");
    expect(lines[0]).toContain("--cold-wait");
    expect(lines[0]).toContain("GITHUB_SYNC_RATE");
  });

  it("stops on SIGINT with exit status 0, answering a request still in its cold wait with 503", async () => {
    gh.addRepo({ owner: "acme", repo: "slow" });
    gh.fault({ target: "api", path: /\/repos\/acme\/slow\/releases$/, status: 0, hang: true });
    const dataDir = path.join(work, "sigint");
    const env = {
      GITHUB_API_URL: gh.apiUrl,
      GITHUB_TOKEN: "",
      REPOSYNC_DATABASE: "",
      STATE_DIRECTORY: "",
      REPOSYNC_COLD_WAIT: "60s",
    };
    await reposync(["--data-dir", dataDir, "add-remote", "slow", "acme/slow"], env);
    const serve = await startServe(["--data-dir", dataDir, "--listen", "127.0.0.1:0"], env);
    const pending = fetch(`${serve.url}/slow/repodata/repomd.xml`);
    await serve.waitFor(/"url":"\/slow\/repodata\/repomd.xml"/);
    const code = await serve.stop("SIGINT");
    const res = await pending;
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("60");
    expect(code, serve.output()).toBe(0);
  });

  // The single process drains through the Daemon, a worker through its own stop: both must cut.
  it.each([1, 2])(
    "with --workers %i, exits 0 on SIGTERM, cutting a download whose client stopped reading",
    async (workers) => {
      const name = "big-1.0-1.x86_64.rpm";
      // Far larger than the socket buffers of a connection: it cannot all be written ahead.
      const content = buildRpm({ main: basicMain("big"), payload: 32 * 1024 * 1024 }).bytes;
      const repo = `stuck${workers}`;
      gh.addRepo({ owner: "acme", repo });
      const release = gh.addRelease("acme", repo, { tag: "v1", assets: [{ name, content }] });
      const dataDir = path.join(work, repo);
      const env = {
        GITHUB_API_URL: gh.apiUrl,
        GITHUB_TOKEN: "",
        REPOSYNC_DATABASE: "",
        STATE_DIRECTORY: "",
      };
      await reposync(["--data-dir", dataDir, "add-remote", repo, `acme/${repo}`], env);
      const serve = await startServe(
        ["--data-dir", dataDir, "--listen", "127.0.0.1:0", "--workers", String(workers)],
        env,
      );
      try {
        expect((await fetch(`${serve.url}/${repo}/repodata/repomd.xml`)).status).toBe(200);
        const stalled = stalledGet(`${serve.url}/${repo}/packages/${release.assetIds[0]}/${name}`);
        // Headers received: the response is under way, and this client will not read its body.
        expect(await stalled.headers).toEqual({ status: 200, length: content.length });

        // Past its 10 s deadline the process exits 1; 0 means it stopped in time, by the cut.
        const code = await serve.stop("SIGTERM");
        expect(code, serve.output()).toBe(0);
        expect(serve.output()).toContain('"msg":"cutting the responses still in flight"');
        const end = await stalled.readToEnd();
        expect(end.complete).toBe(false);
        expect(end.received).toBeLessThan(content.length);
      } finally {
        if (serve.child.exitCode === null) await serve.stop("SIGKILL");
      }
    },
  );
});
