import type { Command } from "commander";
import { formatDuration } from "../config/duration.js";
import type { RateLimitBudget } from "../github/token-bucket.js";
import { listFailedAssets } from "../store/assets.js";
import { countPackages } from "../store/packages.js";
import type { Database } from "../store/port.js";
import { listRemotes } from "../store/remotes.js";
import { listSyncRecords, type SyncRecord, type SyncSummary } from "../store/sync-records.js";
import { withStore } from "./store-options.js";

/** The status of one remote, as `status --json` prints it. */
export interface RemoteStatus {
  readonly name: string;
  readonly repo: string;
  readonly packages: number;
  readonly lastSyncedAt: string | null;
  readonly lastResult: "ok" | "error" | null;
  readonly lastError: string | null;
  /** When the next periodic sync is due (ISO), or "now" (never synced, asked for, or overdue). */
  readonly nextDue: string;
  /** Who holds the sync lease right now, or null. */
  readonly syncingBy: string | null;
  readonly syncRequested: boolean;
  readonly lastSummary: SyncSummary | null;
  /** Assets that could not become packages, with the reason; not read again until they change. */
  readonly unreadableAssets: {
    readonly name: string;
    readonly tag: string;
    readonly reason: string;
  }[];
}

/** Everything `status` shows. */
export interface StatusReport {
  readonly remotes: RemoteStatus[];
  /** The GitHub rate-limit budgets last seen by a syncing process, by credential label. */
  readonly githubBudgets: RateLimitBudget[];
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

function nextDue(record: SyncRecord | undefined, intervalMs: number): string {
  if (record === undefined || record.lastSyncedAt === null || record.requestedAt !== null) {
    return "now";
  }
  const due = record.lastSyncedAt + intervalMs;
  return due <= record.readAt ? "now" : new Date(due).toISOString();
}

/** Reads the status of every remote. */
export async function readStatus(db: Database): Promise<StatusReport> {
  const [remotes, records, counts] = await Promise.all([
    listRemotes(db),
    listSyncRecords(db),
    countPackages(db),
  ]);
  const byName = new Map(records.map((r) => [r.remote, r]));
  const budgets = new Map<string, RateLimitBudget>();
  const out: RemoteStatus[] = [];
  for (const remote of remotes) {
    const record = byName.get(remote.name);
    const live =
      record?.leaseOwner != null &&
      record.leaseExpires !== null &&
      record.leaseExpires > record.readAt;
    const budget = record?.budget ?? null;
    const seen = budget ? budgets.get(budget.key) : undefined;
    if (budget && (seen === undefined || seen.observedAt < budget.observedAt)) {
      budgets.set(budget.key, budget);
    }
    out.push({
      name: remote.name,
      repo: remote.repo,
      packages: counts.get(remote.name) ?? 0,
      lastSyncedAt: iso(record?.lastSyncedAt ?? null),
      lastResult: record?.lastResult ?? null,
      lastError: record?.lastError ?? null,
      nextDue: nextDue(record, remote.intervalMs),
      syncingBy: live ? (record?.leaseOwner ?? null) : null,
      syncRequested: record?.requestedAt != null,
      lastSummary: record?.summary ?? null,
      unreadableAssets: (await listFailedAssets(db, remote.name)).map((a) => ({
        name: a.name,
        tag: a.tag,
        reason: a.deriveError ?? "",
      })),
    });
  }
  return { remotes: out, githubBudgets: [...budgets.values()] };
}

function ago(isoTime: string | null, now: number): string {
  if (isoTime === null) return "never";
  const ms = Math.max(0, now - Date.parse(isoTime));
  return ms < 1000 ? "just now" : `${formatDuration(Math.floor(ms / 1000) * 1000)} ago`;
}

/** The status as a table and notes for a person. */
export function formatStatus(report: StatusReport, now: number): string {
  if (report.remotes.length === 0) {
    return "no remotes yet; add one with `reposync add-remote NAME OWNER/REPO`\n";
  }
  const header = ["NAME", "REPO", "PACKAGES", "LAST SYNC", "RESULT", "NEXT DUE", "SYNCING"];
  const rows = report.remotes.map((r) => [
    r.name,
    r.repo,
    String(r.packages),
    ago(r.lastSyncedAt, now),
    r.lastResult ?? "-",
    r.nextDue === "now" ? (r.syncRequested ? "now (requested)" : "now") : r.nextDue,
    r.syncingBy ?? "-",
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd();
  let out = `${[header, ...rows].map(line).join("\n")}\n`;
  for (const r of report.remotes) {
    if (r.lastResult === "error" && r.lastError)
      out += `\n${r.name}: last sync failed: ${r.lastError}\n`;
    if (r.unreadableAssets.length > 0) {
      out += `\n${r.name}: ${r.unreadableAssets.length} asset(s) could not be read (skipped until they change):\n`;
      for (const a of r.unreadableAssets) out += `  ${a.tag}/${a.name}: ${a.reason}\n`;
    }
  }
  for (const b of report.githubBudgets) {
    out +=
      `\nGitHub budget (${b.key}): ${b.remaining}${b.limit === null ? "" : ` of ${b.limit}`} ` +
      `requests left, resets ${new Date(b.resetAt).toISOString()}\n`;
  }
  return out;
}

/** `reposync status [--json]`. */
export function registerStatusCommand(program: Command): void {
  program
    .command("status")
    .description(
      "Show each remote's packages, last sync and its result, next due time, who is\n" +
        "syncing it, assets that could not be read, and the GitHub rate-limit budget.",
    )
    .option("--json", "print a JSON object { remotes, githubBudgets }")
    .action(async (opts: { json?: boolean }, command: Command) => {
      const report = await withStore(command, (db) => readStatus(db));
      process.stdout.write(
        opts.json === true
          ? `${JSON.stringify(report, null, 2)}\n`
          : formatStatus(report, Date.now()),
      );
    });
}
