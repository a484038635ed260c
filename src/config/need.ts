import { ReposyncError } from "../errors.js";

/**
 * A setting that has a default. Config's type leaves every setting optional, but loadConfig
 * fills the defaulted ones, so a missing one here is a bug in how the config was made.
 */
export function need<T>(value: T | undefined, key: string): T {
  if (value === undefined) {
    throw new ReposyncError("CONFIG_INVALID", `setting ${key} is missing from the configuration`);
  }
  return value;
}
