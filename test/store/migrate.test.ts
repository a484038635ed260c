import { describe, expect, it } from "vitest";
import { isReposyncError } from "../../src/errors.js";
import { loadMigrations, type Migration, migrate } from "../../src/store/migrate.js";
import { openDatabase } from "../../src/store/open-database.js";
import { sql } from "../../src/store/port.js";
import { createTestSchema } from "../support/postgres.js";
import { DIALECTS, PG, useFreshDatabase } from "./harness.js";

const TABLES = [
  "remotes",
  "github_rpm_sync_state",
  "release_assets",
  "packages",
  "repodata_snapshots",
  "snapshot_files",
  "package_files",
  "fetch_leases",
];

describe("the migration files", () => {
  it("exist for both dialects with the same numbers and names", async () => {
    const pg = await loadMigrations("postgres");
    const lite = await loadMigrations("sqlite");
    expect(pg.length).toBeGreaterThan(0);
    expect(pg.map((m) => [m.version, m.name])).toEqual(lite.map((m) => [m.version, m.name]));
  });
});

describe.each(DIALECTS)("migrate on %s", (dialect) => {
  const t = useFreshDatabase(dialect);

  it("creates every table and records the version; a second run does nothing", async () => {
    // useFreshDatabase already migrated once.
    for (const table of TABLES) {
      await expect(t.db().query(sql(`select count(*) as n from ${table}`))).resolves.toHaveLength(
        1,
      );
    }
    const again = await migrate(t.db());
    expect(again.applied).toEqual([]);
    const rows = await t
      .db()
      .query<{ version: number; name: string }>(
        sql("select version, name from schema_migrations order by version"),
      );
    expect(rows.map((r) => Number(r.version))).toEqual(
      (await loadMigrations(dialect)).map((m) => m.version),
    );
  });

  it("rolls back every step of a run when one migration fails", async () => {
    const mine = await loadMigrations(dialect);
    const next = mine.length + 1;
    const broken: Migration[] = [
      ...mine,
      { version: next, name: "good", sql: "create table added_then_undone (x integer);" },
      { version: next + 1, name: "bad", sql: "create table oops (;" },
    ];
    await expect(migrate(t.db(), broken)).rejects.toSatisfy((e) => isReposyncError(e, "DB_ERROR"));
    await expect(t.db().query(sql("select * from added_then_undone"))).rejects.toThrow();
    const rows = await t
      .db()
      .query(sql("select version from schema_migrations where version >= $1", next));
    expect(rows).toEqual([]);
  });

  it("refuses a database whose schema is newer than this build", async () => {
    await t
      .db()
      .exec(
        sql(
          "insert into schema_migrations (version, name, applied_at) values ($1, $2, $3)",
          999,
          "future",
          0,
        ),
      );
    const err = await migrate(t.db()).catch((e: unknown) => e as Error);
    expect(isReposyncError(err, "DB_ERROR")).toBe(true);
    expect((err as Error).message).toContain("999");
  });
});

describe.skipIf(!PG)("migrate on Postgres", () => {
  it("creates the schema named in the URL when it does not exist", async () => {
    const schema = await createTestSchema({ create: false });
    const db = await openDatabase(schema.url);
    try {
      const r = await migrate(db);
      expect(r.applied[0]).toBe("0001_init");
      const [row] = await db.query<{ s: string }>(sql("select current_schema() as s"));
      expect(row?.s).toBe(schema.name);
    } finally {
      await db.close();
      await schema.drop();
    }
  });

  it("lets 6 connections migrate one fresh schema at once: all succeed, one applies", async () => {
    const schema = await createTestSchema({ create: false });
    const dbs = await Promise.all(Array.from({ length: 6 }, () => openDatabase(schema.url)));
    try {
      const results = await Promise.all(dbs.map((db) => migrate(db)));
      expect(results.filter((r) => r.applied.length > 0)).toHaveLength(1);
      expect(new Set(results.map((r) => r.version)).size).toBe(1);
    } finally {
      await Promise.all(dbs.map((db) => db.close()));
      await schema.drop();
    }
  });
});
