import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach } from "vitest";
import { migrate } from "../../src/store/migrate.js";
import { openDatabase } from "../../src/store/open-database.js";
import type { Database, Dialect } from "../../src/store/port.js";
import { createTestSchema, havePostgres } from "../support/postgres.js";

/** Postgres availability, decided once per file (throws with CI=true when it is missing). */
export const PG = await havePostgres();

/** The dialects the shared store suites run on: SQLite always, Postgres when it answers. */
export const DIALECTS: Dialect[] = PG ? ["sqlite", "postgres"] : ["sqlite"];

/**
 * A fresh, migrated database per test: a new SQLite file in a temp folder, or a new Postgres
 * schema. `db()` is the test's database; `open()` opens another connection (another "replica")
 * to the same one, closed after the test.
 */
export function useFreshDatabase(dialect: Dialect): {
  db: () => Database;
  open: () => Promise<Database>;
  url: () => string;
} {
  let url = "";
  let main: Database | undefined;
  const extra: Database[] = [];
  let cleanup: () => Promise<void> = async () => undefined;

  beforeEach(async () => {
    if (dialect === "postgres") {
      const schema = await createTestSchema();
      url = schema.url;
      cleanup = schema.drop;
    } else {
      const dir = mkdtempSync(join(tmpdir(), "reposync-store-"));
      url = join(dir, "reposync.db");
      cleanup = async () => rmSync(dir, { recursive: true, force: true });
    }
    main = await openDatabase(url, { guardNestedUse: true });
    await migrate(main);
  });

  afterEach(async () => {
    for (const d of extra.splice(0)) await d.close();
    await main?.close();
    main = undefined;
    await cleanup();
  });

  return {
    db: () => {
      if (main === undefined) throw new Error("no database outside a test");
      return main;
    },
    open: async () => {
      const d = await openDatabase(url, { guardNestedUse: true });
      extra.push(d);
      return d;
    },
    url: () => url,
  };
}
