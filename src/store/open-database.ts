import type { Database } from "./port.js";
import { openPostgres } from "./postgres-adapter.js";
import { openSqlite, type SqliteOptions } from "./sqlite-adapter.js";

/** True when `url` names a Postgres database rather than a SQLite file. */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/**
 * Opens the database that `url` names: `postgres://…` or `postgresql://…` for Postgres,
 * anything else is a SQLite file path (`sqlite:` in front is allowed and dropped).
 */
export async function openDatabase(url: string, options: SqliteOptions = {}): Promise<Database> {
  if (isPostgresUrl(url)) return openPostgres(url);
  return openSqlite(url.replace(/^sqlite:(\/\/)?/i, ""), options);
}
