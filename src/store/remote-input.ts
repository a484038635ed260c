import picomatch from "picomatch";
import { ReposyncError } from "../errors.js";

/** How a remote serves packages: from the local cache, or a redirect to GitHub. */
export type PackageMode = "cache" | "redirect";

/** A remote as stored: what to mirror and how. */
export interface Remote {
  /** URL path segment and key: `[a-z0-9][a-z0-9._-]{0,62}`. */
  readonly name: string;
  /** `owner/repo` on GitHub. */
  readonly repo: string;
  /** API base URL; null means the configured GITHUB_API_URL. */
  readonly apiUrl: string | null;
  /** Name of the environment variable holding the token; null means GITHUB_TOKEN. */
  readonly tokenEnv: string | null;
  /** Asset-name globs; empty means every `.rpm` asset. */
  readonly include: readonly string[];
  /** Asset-name globs removed after include. */
  readonly exclude: readonly string[];
  /** Whether assets of prereleases are served. */
  readonly prereleases: boolean;
  /** How often the remote is checked, in milliseconds. */
  readonly intervalMs: number;
  readonly packageMode: PackageMode;
  /** Epoch milliseconds (database clock). */
  readonly createdAt: number;
}

/** What `add-remote` (or the admin API) supplies. */
export type NewRemote = Omit<Remote, "createdAt">;

/** A remote name; it appears in URLs and file paths, hence no upper case and no slash. */
export const REMOTE_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;
// GitHub's own rules: owners are 1-39 alphanumerics or inner hyphens, repos 1-100 of [A-Za-z0-9._-].
const GITHUB_REPO = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})\/[A-Za-z0-9._-]{1,100}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
// Prefixes of GitHub tokens: someone pasted the token where its variable's name belongs.
const LOOKS_LIKE_TOKEN = /^(gh[pousr]_|github_pat_)/;
/** Below this, a remote costs more GitHub requests than it can be worth. */
export const MIN_INTERVAL_MS = 10_000;

function invalid(message: string): ReposyncError {
  return new ReposyncError("USAGE", message);
}

/** Throws USAGE unless `name` is a valid remote name. */
export function checkRemoteName(name: string): void {
  if (!REMOTE_NAME.test(name)) {
    throw invalid(
      `remote name "${name}" is invalid: use 1-63 of a-z 0-9 . _ - starting with a letter or digit`,
    );
  }
}

/** Throws USAGE unless `glob` is a glob picomatch can compile for one asset name. */
export function checkGlob(glob: string, flag: string): void {
  if (glob.includes("/")) {
    throw invalid(`${flag} "${glob}": asset names contain no "/"; match the file name only`);
  }
  if (glob.startsWith("!")) {
    throw invalid(`${flag} "${glob}": negation is not supported; use --exclude instead`);
  }
  try {
    // strictBrackets makes an unclosed [ { ( an error instead of a literal character.
    picomatch.makeRe(glob, { strictBrackets: true });
  } catch (err) {
    throw invalid(`${flag} "${glob}" is not a valid glob: ${(err as Error).message}`);
  }
}

/** Checks every field and returns the remote normalised (API URL without trailing slash). */
export function validateRemote(input: NewRemote): NewRemote {
  checkRemoteName(input.name);
  if (!GITHUB_REPO.test(input.repo) || /\/\.{1,2}$/.test(input.repo)) {
    throw invalid(
      `repository "${input.repo}" is invalid: expected OWNER/REPO, e.g. rpm-software-management/dnf`,
    );
  }
  for (const g of input.include) checkGlob(g, "--include");
  for (const g of input.exclude) checkGlob(g, "--exclude");
  if (!Number.isSafeInteger(input.intervalMs) || input.intervalMs < MIN_INTERVAL_MS) {
    throw invalid(`--interval must be at least ${MIN_INTERVAL_MS / 1000}s`);
  }
  if (input.packageMode !== "cache" && input.packageMode !== "redirect") {
    throw invalid(`--packages "${String(input.packageMode)}" is invalid: use cache or redirect`);
  }
  let apiUrl = input.apiUrl;
  if (apiUrl !== null) {
    let u: URL | undefined;
    try {
      u = new URL(apiUrl);
    } catch {
      u = undefined;
    }
    if (u === undefined || (u.protocol !== "http:" && u.protocol !== "https:")) {
      throw invalid(`--api-url "${apiUrl}" is not an http(s) URL`);
    }
    apiUrl = u.toString().replace(/\/+$/, "");
  }
  if (input.tokenEnv !== null) {
    if (LOOKS_LIKE_TOKEN.test(input.tokenEnv)) {
      throw invalid(
        "--token-env takes the NAME of an environment variable that holds the token, not the token itself",
      );
    }
    if (!ENV_NAME.test(input.tokenEnv)) {
      throw invalid(
        `--token-env "${input.tokenEnv}" is not an environment variable name (e.g. GITHUB_TOKEN_ACME)`,
      );
    }
  }
  return { ...input, apiUrl, include: [...input.include], exclude: [...input.exclude] };
}
