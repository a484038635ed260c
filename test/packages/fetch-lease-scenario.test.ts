import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { migrate } from "../../src/store/migrate.js";
import { openDatabase } from "../../src/store/open-database.js";
import { createTestSchema, havePostgres, type TestSchema } from "../support/postgres.js";
import { runFetchLeaseScenario } from "./fetch-lease-scenario.js";

const PG = await havePostgres();

describe.skipIf(!PG)("three instances, thirty packages, three clients (the seed's run)", () => {
  let schema: TestSchema;
  let dir: string;

  beforeEach(async () => {
    schema = await createTestSchema();
    const db = await openDatabase(schema.url);
    await migrate(db);
    await db.close();
    dir = await mkdtemp(path.join(tmpdir(), "reposync-scenario-"));
  });
  afterEach(async () => {
    await schema.drop();
    await rm(dir, { recursive: true, force: true });
  });

  const run = (leases: boolean) =>
    runFetchLeaseScenario({
      databaseUrl: schema.url,
      storeRoot: path.join(dir, "packages"),
      leases,
    });

  it("downloads each package once across the instances with leases, and leaves no lease row", async () => {
    const counts = await run(true);
    expect(counts.succeeded).toBe(90);
    expect(counts.upstreamFetches).toBe(30);
    expect(counts.leaseRowsAfter).toBe(0);
    // The instances that did not fetch a package waited for it (at most two per package; one
    // that took the lease just after the holder released it found the file instead), and every
    // wait ended with the package served.
    expect(counts.leaseWaits).toBeLessThanOrEqual(60);
    expect(Object.keys(counts.leaseWaitsByKind).filter((k) => k !== "served")).toEqual([]);
  });

  it("downloads each package once per instance without leases", async () => {
    const counts = await run(false);
    expect(counts.succeeded).toBe(90);
    expect(counts.upstreamFetches).toBe(90);
    expect(counts.leaseWaits).toBe(0);
  });
});
