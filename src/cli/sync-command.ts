import { Presets, SingleBar } from "cli-progress";
import type { Command } from "commander";
import { remoteTokenResolver } from "../config/remote-token.js";
import type { Config } from "../config/schema.js";
import { ReposyncError } from "../errors.js";
import type { Database } from "../store/port.js";
import { getRemote, listRemotes } from "../store/remotes.js";
import { requestSync } from "../store/sync-requests.js";
import type { SyncReport } from "../sync/sync-job.js";
import { configFor, withStore } from "./store-options.js";

const HELP_AFTER = `
Without --now, marks the remotes in the database and returns at once: every running
\`reposync serve\` looks for such marks each second, and one of them syncs each remote.

With --now, syncs here and now, one remote after another, even if a remote was synced a
moment ago (but never while another process is syncing it). Ctrl-C stops at the next safe
point and keeps what was read. Exits 1 when any remote could not be synced.

Examples:
  $ reposync sync --now            # every remote, here
  $ reposync sync --now tools      # one remote
  $ reposync sync tools            # ask the running service
`;

/** One line per remote for a person: what the sync did, or why it did nothing. */
export function describeReport(report: SyncReport): string {
  if (report.status === "skipped") {
    if (report.reason === "busy") {
      return `${report.remote}: not synced, another process is syncing it (${report.leaseOwner ?? "unknown"})`;
    }
    if (report.reason === "missing") return `${report.remote}: not synced, the remote was removed`;
    return `${report.remote}: not synced, it is not due yet`;
  }
  const s = report.summary;
  const counts = s
    ? `${s.packages} packages (${s.added} added, ${s.changed} changed, ${s.removed} removed, ` +
      `${s.failed} unreadable${s.deferred > 0 ? `, ${s.deferred} left for later` : ""}), ` +
      (s.snapshot === null ? "repodata unchanged" : `new repodata revision ${s.snapshot}`)
    : "";
  if (report.status === "ok") return `${report.remote}: ok, ${counts}`;
  return `${report.remote}: FAILED: ${report.error ?? "unknown error"}${counts ? `; ${counts}` : ""}`;
}

async function syncNow(db: Database, config: Config, names: readonly string[]): Promise<void> {
  const remotes =
    names.length === 0
      ? await listRemotes(db)
      : await Promise.all(names.map((name) => getRemote(db, name)));
  if (remotes.length === 0) {
    process.stdout.write("no remotes yet; add one with `reposync add-remote NAME OWNER/REPO`\n");
    return;
  }
  // The GitHub client and the sync job load only for `sync --now`: `sync` alone just marks rows.
  const [{ DEFAULT_API_BASE_URL }, { createSyncDeps }, { runSync }] = await Promise.all([
    import("../github/client.js"),
    import("../sync/sync-deps.js"),
    import("../sync/sync-job.js"),
  ]);
  const { deps } = createSyncDeps({
    db,
    settings: {
      // Config marks every setting optional in its type; loadConfig fills these from defaults.
      githubApiUrl: config.githubApiUrl ?? DEFAULT_API_BASE_URL,
      githubSyncRate: config.githubSyncRate ?? 1,
      githubSyncBurst: config.githubSyncBurst ?? 5,
    },
    tokenFor: remoteTokenResolver(config.githubToken),
  });
  // Ctrl-C ends the current remote at a safe point (what was read is committed, the lease
  // released) instead of leaving a lease behind for two minutes.
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const failed: string[] = [];
  try {
    for (const remote of remotes) {
      if (stop.signal.aborted) break;
      const bar = process.stderr.isTTY
        ? new SingleBar(
            {
              format: `${remote.name} [{bar}] {value}/{total} assets read`,
              stream: process.stderr,
              clearOnComplete: true,
            },
            Presets.shades_classic,
          )
        : null;
      let started = false;
      try {
        const report = await runSync(deps, remote.name, {
          prime: true,
          signal: stop.signal,
          onProgress: (p) => {
            if (bar === null || p.total === 0) return;
            if (!started) bar.start(p.total, 0);
            started = true;
            bar.update(p.read);
          },
        });
        bar?.stop();
        process.stdout.write(`${describeReport(report)}\n`);
        if (report.status !== "ok") failed.push(remote.name);
      } finally {
        bar?.stop();
      }
    }
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
  if (failed.length > 0) {
    throw new ReposyncError("SYNC_FAILED", `sync failed for ${failed.join(", ")}`);
  }
}

/** `reposync sync [--now] [NAME…]`. */
export function registerSyncCommand(program: Command): void {
  program
    .command("sync")
    .summary("sync remotes now: here with --now, else by asking the running service")
    .description(
      "Sync remotes now. With --now this process syncs them and prints a line per remote;\n" +
        "without it, the running service is asked to, and the command returns at once.",
    )
    .argument("[names...]", "remotes to sync (default: all)")
    .option("--now", "sync here and now, with a progress bar and a summary")
    .addHelpText("after", HELP_AFTER)
    .action(async (names: string[], opts: { now?: boolean }, command: Command) => {
      if (opts.now === true) {
        const config = configFor(command);
        await withStore(command, (db) => syncNow(db, config, names));
        return;
      }
      const marked = await withStore(command, (db) => requestSync(db, names));
      process.stdout.write(
        marked.length === 0
          ? "no remotes yet; add one with `reposync add-remote NAME OWNER/REPO`\n"
          : `asked for a sync of ${marked.join(", ")}; a running \`reposync serve\` starts it within seconds\n`,
      );
    });
}
