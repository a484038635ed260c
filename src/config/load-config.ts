import { join, resolve } from "node:path";
import { ReposyncError } from "../errors.js";
import { type Config, SETTINGS, type SettingKey } from "./schema.js";

/** Raw flag values as commander hands them over (text, or undefined when not given). */
export type ConfigFlags = Partial<Record<SettingKey, string | undefined>>;

/** Inputs of loadConfig; `env` defaults to the process environment. */
export interface LoadConfigInput {
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly flags?: ConfigFlags;
}

/** The flag's long name without its argument, e.g. `--github-sync-rate`. */
function flagName(flag: string): string {
  return flag.split(" ")[0] ?? flag;
}

/**
 * Reads every setting from flags, then the environment, then the defaults, and returns a frozen
 * Config. Every bad value is reported at once, each naming the flag or variable it came from,
 * in one ReposyncError CONFIG_INVALID, so a person fixes them all in one go.
 */
export function loadConfig(input: LoadConfigInput = {}): Config {
  // The one place in reposync that reads the process environment.
  const env = input.env ?? process.env;
  const flags = input.flags ?? {};
  const values: Record<string, unknown> = {};
  const problems: string[] = [];

  for (const key of Object.keys(SETTINGS) as SettingKey[]) {
    const s = SETTINGS[key];
    const fromFlag = flags[key];
    const fromEnv = s.env === undefined ? undefined : env[s.env];
    let raw: string | undefined;
    let source: string;
    if (fromFlag !== undefined) {
      raw = fromFlag;
      source = s.flag === undefined ? key : flagName(s.flag);
    } else if (fromEnv !== undefined && fromEnv !== "") {
      // An empty variable counts as unset, as systemd EnvironmentFile= lines like `GITHUB_TOKEN=` mean.
      raw = fromEnv;
      source = s.env ?? key;
    } else {
      raw = "default" in s ? s.default : undefined;
      source = `default of ${key}`;
    }
    if (raw === undefined) continue;
    try {
      values[key] = s.parse(raw);
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      problems.push(`${source}=${JSON.stringify(raw)}: ${why}`);
    }
  }

  if (problems.length > 0) {
    throw new ReposyncError("CONFIG_INVALID", `invalid configuration: ${problems.join("; ")}`);
  }
  const dataDir = resolve(String(values.dataDir));
  values.dataDir = dataDir;
  values.database ??= join(dataDir, "reposync.db");
  return Object.freeze(values) as unknown as Config;
}
