import type { Command } from "commander";
import { type ConfigFlags, loadConfig } from "../config/load-config.js";
import { type Config, SETTINGS, type SettingKey } from "../config/schema.js";
import { migrate } from "../store/migrate.js";
import { openDatabase } from "../store/open-database.js";
import type { Database } from "../store/port.js";

/**
 * Adds the flags of the given settings to a command, with the schema's help text and the name
 * of the variable that also sets them. No default is given to commander on purpose: a flag that
 * was not typed must stay undefined so the environment can still win over the default.
 */
export function addSettingOptions(command: Command, keys: readonly SettingKey[]): Command {
  for (const key of keys) {
    const s = SETTINGS[key];
    if (s.flag === undefined) continue;
    const env = s.env === undefined ? "" : ` [env: ${s.env}]`;
    const def = "default" in s && s.default !== undefined ? ` (default: ${s.default})` : "";
    command.option(s.flag, `${s.help}${def}${env}`);
  }
  return command;
}

/**
 * Adds the global `--database` and `--data-dir` options to the program. They are program-level so
 * every command takes them, before or after its own name (commander reads global options anywhere).
 */
export function addStoreOptions(program: Command): Command {
  return addSettingOptions(program, ["database", "dataDir"]);
}

/**
 * The config for a command: the setting flags it (or the program) was given, over the
 * environment, over the defaults. Commander names an option by its camel-cased flag, which is
 * the setting's key (`--github-sync-rate` is githubSyncRate).
 */
export function configFor(command: Command): Config {
  const opts = command.optsWithGlobals<Record<string, unknown>>();
  const flags: ConfigFlags = {};
  for (const key of Object.keys(SETTINGS) as SettingKey[]) {
    const v = opts[key];
    if (typeof v === "string") flags[key] = v;
  }
  return loadConfig({ flags });
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
