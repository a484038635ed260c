import type { Command } from "commander";
import { loadConfig } from "../config/load-config.js";
import { type Config, SETTINGS } from "../config/schema.js";
import { migrate } from "../store/migrate.js";
import { openDatabase } from "../store/open-database.js";
import type { Database } from "../store/port.js";

/**
 * Adds the global `--database` and `--data-dir` options to the program. They are program-level so
 * every command takes them, before or after its own name (commander reads global options anywhere).
 */
export function addStoreOptions(program: Command): Command {
  for (const key of ["database", "dataDir"] as const) {
    const s = SETTINGS[key];
    if (s.flag !== undefined) program.option(s.flag, `${s.help} [env: ${s.env}]`);
  }
  return program;
}

/** The config for a command: its global flags over the environment over the defaults. */
export function configFor(command: Command): Config {
  const opts = command.optsWithGlobals<{ database?: string; dataDir?: string }>();
  return loadConfig({ flags: { database: opts.database, dataDir: opts.dataDir } });
}

/**
 * Opens the database the command's flags name, brings its schema up to date (so the first
 * `add-remote` on a new machine just works; safe when a server migrates at the same moment),
 * runs `fn`, and closes the database whatever happens.
 */
export async function withStore<T>(command: Command, fn: (db: Database) => Promise<T>): Promise<T> {
  const db = await openDatabase(configFor(command).database);
  try {
    await migrate(db);
    return await fn(db);
  } finally {
    await db.close();
  }
}
