import { readdirSync } from "node:fs";
import * as path from "node:path";
import type { NewRemote } from "../../src/store/remote-input.js";
import { REPO_ROOT } from "./tools.js";

/** The committed RPMs built from fixtures/specs by fixtures/build.sh (tests never need rpmbuild). */
export const FIXTURE_RPMS_DIR = path.join(REPO_ROOT, "fixtures", "rpms");

/** The spec files the fixture RPMs are built from. */
export const FIXTURE_SPECS_DIR = path.join(REPO_ROOT, "fixtures", "specs");

/**
 * Absolute paths of every fixture RPM (binary and source), sorted by file name so tests that
 * iterate over them are deterministic.
 */
export function listFixtureRpms(): string[] {
  return readdirSync(FIXTURE_RPMS_DIR)
    .filter((name) => name.endsWith(".rpm"))
    .sort()
    .map((name) => path.join(FIXTURE_RPMS_DIR, name));
}

/** The path of one fixture RPM by file name; throws when it is missing so a typo fails loudly. */
export function fixtureRpm(fileName: string): string {
  const found = listFixtureRpms().find((p) => path.basename(p) === fileName);
  if (found === undefined) {
    throw new Error(`no fixture RPM named ${fileName} in ${FIXTURE_RPMS_DIR}`);
  }
  return found;
}

/**
 * What add-remote stores for `reposync add-remote NAME acme/REPO` with no options (every .rpm
 * asset, no prereleases, checked every 5 minutes, packages cached), with `overrides` on top.
 */
export function plainRemote(
  name: string,
  repo = `acme/${name}`,
  overrides: Partial<NewRemote> = {},
): NewRemote {
  return {
    name,
    repo,
    apiUrl: null,
    tokenEnv: null,
    include: [],
    exclude: [],
    prereleases: false,
    intervalMs: 300_000,
    packageMode: "cache",
    ...overrides,
  };
}
