import type { Command } from "commander";
import { migrate } from "../store/migrate.js";
import { openDatabase } from "../store/open-database.js";
import { configFor } from "./store-options.js";

/** `reposync migrate`: brings the database schema up to date (serve does this too). */
export function registerMigrateCommand(program: Command): void {
  program
    .command("migrate")
    .description("Apply pending database migrations; safe while other processes do the same.")
    .action(async (_opts: unknown, command: Command) => {
      const db = await openDatabase(configFor(command).database);
      try {
        const r = await migrate(db);
        process.stdout.write(
          r.applied.length === 0
            ? `database ${db.target} is up to date (schema version ${r.version})\n`
            : `database ${db.target}: applied ${r.applied.join(", ")} (schema version ${r.version})\n`,
        );
      } finally {
        await db.close();
      }
    });
}
