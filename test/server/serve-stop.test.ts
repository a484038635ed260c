import { mkdtemp, rm } from "node:fs/promises";
import { get, type IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../packages/deferred.js";
import { basicMain, buildRpm } from "../rpm/header-builder.js";
import { FakeGitHub } from "../support/fake-github.js";
import { ensureBuilt, reposync, type ServeProcess, startServe } from "./cli-process.js";

/**
 * A GET whose body the client does not read until the test says so: once the headers are in,
 * the client's buffers fill and the server's writes back up, so a body larger than the socket
 * buffers of both ends stays in flight as long as the test likes (a stalled dnf client).
 */
function stalledGet(url: string) {
  const response = deferred<IncomingMessage>();
  const req = get(url, { agent: false }, (res) => {
    res.pause();
    response.resolve(res);
  });
  req.on("error", (err) => response.reject(err));
  return {
    /** The status and Content-Length, once the headers arrived (the body is still unread). */
    headers: response.promise.then((res) => ({
      status: res.statusCode,
      length: Number(res.headers["content-length"]),
    })),
    /** Reads the body until the connection or the message ends. */
    async readToEnd(): Promise<{ received: number; complete: boolean }> {
      const res = await response.promise;
      let received = 0;
      res.on("data", (chunk: Buffer) => {
        received += chunk.length;
      });
      // A cut connection is an "aborted" error here; what the test looks at is complete.
      res.on("error", () => {});
      // Paused by hand at the headers: a data listener alone would not start it again.
      res.resume();
      await new Promise<void>((done) => res.once("close", () => done()));
      return { received, complete: res.complete };
    },
  };
}

describe("reposync serve as a process: SIGTERM with a response that will not end by itself", () => {
  let gh: FakeGitHub;
  let work: string;
  let serve: ServeProcess | undefined;

  beforeAll(async () => {
    ensureBuilt();
    gh = await FakeGitHub.start();
    work = await mkdtemp(path.join(tmpdir(), "reposync-serve-stop-"));
  }, 120_000);

  afterAll(async () => {
    if (serve && serve.child.exitCode === null) await serve.stop("SIGKILL");
    await gh?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("exits 0 on SIGTERM, cutting a download whose client stopped reading", async () => {
    const name = "big-1.0-1.x86_64.rpm";
    // Far larger than the socket buffers of a connection: it cannot all be written ahead.
    const content = buildRpm({ main: basicMain("big"), payload: 32 * 1024 * 1024 }).bytes;
    gh.addRepo({ owner: "acme", repo: "stuck" });
    const release = gh.addRelease("acme", "stuck", { tag: "v1", assets: [{ name, content }] });
    const dataDir = path.join(work, "sigterm");
    const env = {
      GITHUB_API_URL: gh.apiUrl,
      GITHUB_TOKEN: "",
      REPOSYNC_DATABASE: "",
      STATE_DIRECTORY: "",
    };
    await reposync(["--data-dir", dataDir, "add-remote", "stuck", "acme/stuck"], env);
    serve = await startServe(["--data-dir", dataDir, "--listen", "127.0.0.1:0"], env);
    expect((await fetch(`${serve.url}/stuck/repodata/repomd.xml`)).status).toBe(200);

    const stalled = stalledGet(`${serve.url}/stuck/packages/${release.assetIds[0]}/${name}`);
    // Headers received: the response is under way, and this client will not read its body.
    expect(await stalled.headers).toEqual({ status: 200, length: content.length });

    // Past its 10 s deadline the process exits 1; 0 means it stopped in time, by the cut.
    const code = await serve.stop("SIGTERM");
    expect(code, serve.output()).toBe(0);
    expect(serve.output()).toContain('"msg":"cutting the responses still in flight"');
    const end = await stalled.readToEnd();
    expect(end.complete).toBe(false);
    expect(end.received).toBeLessThan(content.length);
  });
});
