import type { Command } from "commander";
import { formatDuration, parseDuration } from "../config/duration.js";
import { ReposyncError } from "../errors.js";
import type { PackageMode } from "../store/remote-input.js";
import { addRemote } from "../store/remotes.js";
import { withStore } from "./store-options.js";

interface AddRemoteOptions {
  include: string[];
  exclude: string[];
  prereleases?: boolean;
  interval: string;
  packages: string;
  apiUrl?: string;
  tokenEnv?: string;
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

/** `reposync add-remote NAME OWNER/REPO [options]`: stores a remote; a running server primes it. */
export function registerAddRemoteCommand(program: Command): void {
  program
    .command("add-remote")
    .summary("add a GitHub repository whose .rpm release assets become a dnf repository")
    .description(
      "Add a GitHub repository whose releases' .rpm assets are served as a dnf repository.\n" +
        "Returns at once; a running `reposync serve` syncs it within seconds.",
    )
    .argument("<name>", "name of the repository in URLs: [a-z0-9][a-z0-9._-]{0,62}")
    .argument("<owner/repo>", "GitHub repository, e.g. rpm-software-management/dnf")
    .option("--include <glob>", "serve only assets whose name matches (repeatable)", collect, [])
    .option("--exclude <glob>", "leave out assets whose name matches (repeatable)", collect, [])
    .option("--prereleases", "also serve assets of prereleases")
    .option("--interval <duration>", "how often to check GitHub (90s, 5m, 1h)", "5m")
    .option(
      "--packages <mode>",
      "cache: serve from the local cache; redirect: 302 to GitHub",
      "cache",
    )
    .option("--api-url <url>", "GitHub API base URL (GitHub Enterprise: https://HOST/api/v3)")
    .option(
      "--token-env <VAR>",
      "name of the environment variable holding the token (never the token)",
    )
    .action(async (name: string, repo: string, opts: AddRemoteOptions, command: Command) => {
      let intervalMs: number;
      try {
        intervalMs = parseDuration(opts.interval, "--interval");
      } catch (err) {
        throw new ReposyncError("USAGE", (err as Error).message, { cause: err });
      }
      const remote = await withStore(command, (db) =>
        addRemote(db, {
          name,
          repo,
          apiUrl: opts.apiUrl ?? null,
          tokenEnv: opts.tokenEnv ?? null,
          include: opts.include,
          exclude: opts.exclude,
          prereleases: opts.prereleases === true,
          intervalMs,
          packageMode: opts.packages as PackageMode,
        }),
      );
      process.stdout.write(
        `added remote ${remote.name} (${remote.repo}): checked every ${formatDuration(remote.intervalMs)}, ` +
          `packages ${remote.packageMode === "cache" ? "cached" : "redirected to GitHub"}\n`,
      );
    });
}
