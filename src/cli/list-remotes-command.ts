import type { Command } from "commander";
import { formatDuration } from "../config/duration.js";
import type { Remote } from "../store/remote-input.js";
import { listRemotes } from "../store/remotes.js";
import { withStore } from "./store-options.js";

/** The JSON shape of one remote: every add-remote option under a stable name. */
export function remoteToJson(r: Remote): Record<string, unknown> {
  return {
    name: r.name,
    repo: r.repo,
    include: r.include,
    exclude: r.exclude,
    prereleases: r.prereleases,
    interval: formatDuration(r.intervalMs),
    intervalMs: r.intervalMs,
    packages: r.packageMode,
    apiUrl: r.apiUrl,
    tokenEnv: r.tokenEnv,
    createdAt: new Date(r.createdAt).toISOString(),
  };
}

/** Left-aligned columns separated by two spaces, like `ps` or `kubectl get`. */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  return [header, ...rows]
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i] ?? 0))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/** `reposync list-remotes [--json]`. */
export function registerListRemotesCommand(program: Command): void {
  program
    .command("list-remotes")
    .description("List the remotes: a table, or with --json an array.")
    .option("--json", "print a JSON array")
    .action(async (opts: { json?: boolean }, command: Command) => {
      const remotes = await withStore(command, (db) => listRemotes(db));
      if (opts.json === true) {
        process.stdout.write(`${JSON.stringify(remotes.map(remoteToJson), null, 2)}\n`);
        return;
      }
      if (remotes.length === 0) {
        process.stdout.write(
          "no remotes yet; add one with `reposync add-remote NAME OWNER/REPO`\n",
        );
        return;
      }
      const rows = remotes.map((r) => [
        r.name,
        r.repo,
        formatDuration(r.intervalMs),
        r.packageMode,
        r.prereleases ? "yes" : "no",
        r.include.join(",") || "*",
        r.exclude.join(",") || "-",
        r.apiUrl ?? "-",
        r.tokenEnv ?? "-",
      ]);
      const header = [
        "NAME",
        "REPO",
        "INTERVAL",
        "PACKAGES",
        "PRERELEASES",
        "INCLUDE",
        "EXCLUDE",
        "API",
        "TOKEN ENV",
      ];
      process.stdout.write(`${table(header, rows)}\n`);
    });
}
