import { beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../server/cli-process.js";
import { havePostgres } from "../support/postgres.js";
import { runDownloads } from "./package-downloads.js";

const PG = await havePostgres();

describe.skipIf(!PG)(
  "three reposync serve processes on one database and one package folder",
  () => {
    beforeAll(() => {
      ensureBuilt();
    }, 120_000);

    it("download each of 30 packages from GitHub once for 90 requests through three replicas, and leave no lease row", async () => {
      const counts = await runDownloads({ leases: true });
      expect(counts.succeeded).toBe(90);
      expect(counts.upstreamFetches).toBe(30);
      expect(counts.leaseRowsAfter).toBe(0);
      // The replicas that did not download a package waited for the one that did, and every
      // wait ended with the package served from the shared folder.
      expect(counts.leaseWaits).toBeGreaterThan(0);
      expect(Object.keys(counts.leaseWaitsByKind)).toEqual(["served"]);
      expect(counts.upstreamFetchesPerReplica.reduce((a, b) => a + b, 0)).toBe(30);
    }, 90_000);

    it("download a package once per replica that missed it with REPOSYNC_FETCH_LEASES=off", async () => {
      const counts = await runDownloads({ leases: false });
      expect(counts.succeeded).toBe(90);
      // The first six packages of each client are missed by all three replicas at once.
      expect(counts.upstreamFetches).toBeGreaterThan(30);
      expect(counts.leaseWaits).toBe(0);
      expect(counts.leaseRowsAfter).toBe(0);
    }, 90_000);
  },
);
