import type { Database } from "./port.js";
import type { SqliteOptions } from "./sqlite-adapter.js";

/** True when `url` names a Postgres database rather than a SQLite file. */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/**
 * Opens the database that `url` names: `postgres://…` or `postgresql://…` for Postgres,
 * anything else is a SQLite file path (`sqlite:` in front is allowed and dropped).
 */
export async function openDatabase(url: string, options: SqliteOptions = {}): Promise<Database> {
  // Each driver is loaded only when used: every CLI command starts faster without the other.
  if (isPostgresUrl(url)) return (await import("./postgres-adapter.js")).openPostgres(url);
  const { openSqlite } = await import("./sqlite-adapter.js");
  return openSqlite(url.replace(/^sqlite:(\/\/)?/i, ""), options);
}
