import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ReposyncError } from "../errors.js";
import { type Database, type Dialect, nowMs, sql } from "./port.js";

/** One numbered SQL file, e.g. `0001_init.sql`. */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/**
 * The `migrations/` folder of the package. This module runs from `src/store/` under vitest and
 * from `dist/store/` when built, so the folder is found by walking up rather than by a fixed path.
 */
export function migrationsDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(dir, "migrations");
    if (existsSync(join(candidate, "sqlite")) && existsSync(join(dir, "package.json"))) {
      return candidate;
    }
    const parent = dirname(dir);
    if (parent === dir) {
      throw new ReposyncError("IO_ERROR", "cannot find the migrations folder of reposync");
    }
    dir = parent;
  }
}

/** Reads the migrations of one dialect, in order; a gap or duplicate number is an error. */
export async function loadMigrations(
  dialect: Dialect,
  root = migrationsDir(),
): Promise<Migration[]> {
  const dir = join(root, dialect);
  const files = (await readdir(dir)).filter((f) => f.endsWith(".sql")).sort();
  const out: Migration[] = [];
  for (const file of files) {
    const m = /^(\d{4})_([a-z0-9_]+)\.sql$/.exec(file);
    if (!m)
      throw new ReposyncError("IO_ERROR", `migration ${dir}/${file}: name is not NNNN_name.sql`);
    const version = Number(m[1]);
    if (version !== out.length + 1) {
      throw new ReposyncError(
        "IO_ERROR",
        `migration ${dir}/${file}: expected number ${out.length + 1}`,
      );
    }
    out.push({ version, name: m[2] ?? file, sql: await readFile(join(dir, file), "utf8") });
  }
  return out;
}

/** What a migrate run did. */
export interface MigrateResult {
  /** The migrations this run applied, e.g. `0001_init`; empty when the schema was current. */
  readonly applied: readonly string[];
  /** The schema version afterwards. */
  readonly version: number;
}

/**
 * The advisory-lock key that serialises migrations of one schema. Keyed by schema so that
 * separate schemas (one per test, or per deployment) migrate without waiting for each other.
 */
export function migrationLockKey(schema: string | undefined): string {
  return `reposync migrations ${schema ?? "public"}`;
}

const TABLE =
  "create table if not exists schema_migrations " +
  "(version integer primary key, name text not null, applied_at bigint not null)";

/**
 * Applies the pending migrations in one transaction. Several processes may start at once (every
 * replica runs this at `serve`): on Postgres a transaction-scoped advisory lock, keyed by the
 * schema, makes the others wait and then find nothing left to do; on SQLite BEGIN IMMEDIATE does
 * the same through the file's write lock. A failed migration rolls back entirely.
 */
export async function migrate(
  db: Database,
  migrations?: readonly Migration[],
): Promise<MigrateResult> {
  const all = migrations ?? (await loadMigrations(db.dialect));
  return db.transaction(async (tx) => {
    if (tx.dialect === "postgres") {
      // The pool's 60 s statement timeout suits queries, not a wait behind another replica's
      // migration or a migration that rewrites a big table; this transaction gets 10 minutes.
      await tx.runScript("set local statement_timeout = '10min'");
      await tx.query(
        sql("select pg_advisory_xact_lock(hashtext($1))", migrationLockKey(db.schema)),
      );
      if (db.schema !== undefined) {
        // Validated as a plain lower-case identifier when the URL was parsed.
        await tx.runScript(`create schema if not exists ${db.schema}`);
      }
    }
    await tx.runScript(TABLE);
    const rows = await tx.query<{ version: number }>(sql("select version from schema_migrations"));
    const done = new Set(rows.map((r) => Number(r.version)));
    const newest = Math.max(0, ...done);
    if (newest > all.length) {
      throw new ReposyncError(
        "DB_ERROR",
        `database ${db.target} has schema version ${newest}, newer than this reposync knows (${all.length}); upgrade reposync`,
      );
    }
    const applied: string[] = [];
    for (const m of all) {
      if (done.has(m.version)) continue;
      await tx.runScript(m.sql);
      await tx.exec(
        sql(
          `insert into schema_migrations (version, name, applied_at) values ($1, $2, ${nowMs(tx.dialect)})`,
          m.version,
          m.name,
        ),
      );
      applied.push(`${String(m.version).padStart(4, "0")}_${m.name}`);
    }
    return { applied, version: all.length };
  });
}
