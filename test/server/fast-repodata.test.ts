import { Writable } from "node:stream";
import pino from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { useFreshDatabase } from "../store/harness.js";
import { FakeGitHub } from "../support/fake-github.js";
import { syncedRemote, type TestServer, testServer } from "./harness.js";

let gh: FakeGitHub;
beforeAll(async () => {
  gh = await FakeGitHub.start();
});
afterAll(async () => {
  await gh.close();
});

/** A pino logger whose lines are kept, to tell which requests went through fastify. */
function capturedLogger() {
  const lines: { msg?: string; req?: { url?: string } }[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split("\n")) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level: "warn" }, stream), lines };
}

/** A response as a client sees it, minus the Date header that differs by the second. */
async function answer(url: string, init: RequestInit = {}) {
  const res = await fetch(url, init);
  const headers = Object.fromEntries(
    [...res.headers].filter(([k]) => k !== "date" && k !== "keep-alive" && k !== "connection"),
  );
  return { status: res.status, headers, body: Buffer.from(await res.arrayBuffer()) };
}

describe("plain repodata requests answered before fastify", () => {
  const t = useFreshDatabase("sqlite");
  const servers: TestServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });

  it("answer exactly as the fastify routes do, and only once the answer is in memory", async () => {
    const { name } = await syncedRemote(t.db(), gh);
    const { logger, lines } = capturedLogger();
    // Built quiet (so the fast path is on), then made to log every request fastify handles:
    // a request that leaves no "request completed" line did not go through fastify.
    const server = await testServer(t.db(), gh, { logger });
    servers.push(server);
    logger.level = "info";
    const base = await server.app.listen({ host: "127.0.0.1", port: 0 });
    const throughFastify = () => lines.filter((l) => l.msg === "request completed").length;

    const repomdUrl = `${base}/${name}/repodata/repomd.xml`;
    const first = await answer(repomdUrl); // memory is cold: fastify reads the database
    expect(throughFastify()).toBe(1);
    const second = await answer(repomdUrl);
    expect(throughFastify()).toBe(1);
    expect(second).toEqual(first);
    expect(first.status).toBe(200);

    const primary = /href="repodata\/([^"]+-primary\.xml\.gz)"/.exec(first.body.toString())?.[1];
    expect(primary).toBeDefined();
    const fileUrl = `${base}/${name}/repodata/${primary}`;
    const fileFirst = await answer(fileUrl);
    expect(throughFastify()).toBe(2);
    const fileSecond = await answer(fileUrl);
    const fileHead = await answer(fileUrl, { method: "HEAD" });
    const fileCurrent = await answer(fileUrl, { headers: { "if-none-match": `"${primary}"` } });
    const repomdCurrent = await answer(repomdUrl, {
      headers: { "if-none-match": String(first.headers.etag) },
    });
    expect(throughFastify()).toBe(2);
    expect(fileSecond).toEqual(fileFirst);
    expect(fileHead).toEqual({ ...fileFirst, body: Buffer.alloc(0) });
    expect(fileCurrent.status).toBe(304);
    expect(repomdCurrent.status).toBe(304);

    // The same conditional answers from fastify's routes (inject never reaches the fast path).
    const injected = await server.app.inject({
      url: `/${name}/repodata/${primary}`,
      headers: { "if-none-match": `"${primary}"` },
    });
    expect(injected.statusCode).toBe(304);
    expect(injected.headers.etag).toBe(fileCurrent.headers.etag);
    expect(injected.headers["cache-control"]).toBe(fileCurrent.headers["cache-control"]);

    // A range is fastify's: it answers 206.
    const ranged = await answer(fileUrl, { headers: { range: "bytes=0-9" } });
    expect(ranged.status).toBe(206);
    expect(ranged.body.equals(fileFirst.body.subarray(0, 10))).toBe(true);
    expect(throughFastify()).toBe(4); // the injected request and the ranged one

    // Every request is counted, whichever path answered it.
    const counted = await server.metrics.registry.getSingleMetricAsString(
      "reposync_http_request_duration_seconds",
    );
    expect(counted).toMatch(
      /_count{route="\/:remote\/repodata\/repomd\.xml",method="GET",status="200"} 2/,
    );
  });
});
