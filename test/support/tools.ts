import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root and the shared folder beside it (docs, corpus). */
export const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const SHARED_DIR = path.resolve(REPO_ROOT, "..", "shared");
export const CORPUS_DIR = path.join(SHARED_DIR, "corpus", "createrepo_c");

/** True in CI, where a missing tool or server is a failure, never a silent skip. */
export const IN_CI = process.env.CI === "true";

function hasCommand(name: string): boolean {
  try {
    execFileSync("sh", ["-c", `command -v ${name}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether the external commands a test needs exist. Outside CI a test may skip when they do not
 * (`describe.skipIf(!haveTools(...))`); in CI this throws, so the run fails instead of skipping.
 */
export function haveTools(...names: string[]): boolean {
  const missing = names.filter((n) => !hasCommand(n));
  if (missing.length === 0) return true;
  if (IN_CI) {
    throw new Error(
      `CI=true but these tools are missing: ${missing.join(", ")} (.ci/run installs them)`,
    );
  }
  return false;
}
