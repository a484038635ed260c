import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadMigrations, migrationLockKey } from "../../src/store/migrate.js";
import { havePostgres, POSTGRES_URL } from "../support/postgres.js";
import { buildCli, runCli } from "./built-cli.js";

const PG = await havePostgres();
let cli: ReturnType<typeof buildCli>;

beforeAll(() => {
  cli = buildCli();
});
afterAll(() => cli?.remove());

describe.skipIf(!PG)("two `reposync migrate` processes on one fresh Postgres database", () => {
  it("both exit 0 when they start at the same moment, and the schema is applied once", async () => {
    const name = `reposync_mig_${process.pid}_${Date.now()}`;
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    await admin.query(`create database ${name}`);
    const url = new URL(POSTGRES_URL);
    url.pathname = `/${name}`;
    const holder = new pg.Client({ connectionString: url.toString() });
    try {
      await holder.connect();
      // Hold the migration lock so both processes are provably inside migrate, waiting on it,
      // before either can start; then let go and let them race.
      await holder.query("select pg_advisory_lock(hashtext($1))", [migrationLockKey(undefined)]);
      const runs = [0, 1].map(() => runCli(cli.mainJs, ["migrate", "--database", url.toString()]));
      const deadline = Date.now() + 60_000;
      for (;;) {
        const r = await admin.query<{ n: number }>(
          "select count(*)::int as n from pg_stat_activity where datname = $1 and wait_event = 'advisory'",
          [name],
        );
        if ((r.rows[0]?.n ?? 0) >= 2) break;
        if (Date.now() > deadline)
          throw new Error("the two migrate processes never reached the lock");
        // Poll the condition itself (not a guess at how long it takes), gently on a 2-core box.
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      await holder.query("select pg_advisory_unlock_all()");
      const results = await Promise.all(runs);
      for (const r of results) {
        expect(r.stderr).toBe("");
        expect(r.code).toBe(0);
      }
      expect(results.filter((r) => r.stdout.includes("applied 0001_init"))).toHaveLength(1);
      expect(results.filter((r) => r.stdout.includes("up to date"))).toHaveLength(1);
      const rows = await holder.query<{ version: number }>(
        "select version from schema_migrations order by version",
      );
      const known = await loadMigrations("postgres");
      expect(rows.rows.map((r) => r.version)).toEqual(known.map((m) => m.version));
    } finally {
      await holder.end().catch(() => undefined);
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.end();
    }
  });
});

describe("two `reposync migrate` processes on one fresh SQLite file", () => {
  it("both exit 0 and the schema is applied once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "reposync-mig-"));
    try {
      const results = await Promise.all(
        [0, 1].map(() => runCli(cli.mainJs, ["migrate", "--data-dir", dir])),
      );
      for (const r of results) {
        expect(r.stderr).toBe("");
        expect(r.code).toBe(0);
      }
      expect(results.filter((r) => r.stdout.includes("applied 0001_init"))).toHaveLength(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
