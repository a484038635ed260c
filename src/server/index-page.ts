import type { Remote } from "../store/remote-input.js";
import type { SyncRecord } from "../store/sync-records.js";

/** One remote's row on the index page. */
export interface IndexRow {
  readonly remote: Remote;
  readonly packages: number;
  readonly sync: SyncRecord | undefined;
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function lastSync(sync: SyncRecord | undefined): string {
  if (!sync || sync.lastSyncedAt === null) return "not yet";
  const when = new Date(sync.lastSyncedAt).toISOString().replace(".000Z", "Z");
  const result = sync.lastResult === "error" ? ` (failed: ${sync.lastError ?? "unknown"})` : "";
  return `${when}${result}`;
}

/** The HTML page at `/`: every remote with its packages and last sync, and how to use one. */
export function renderIndexPage(rows: readonly IndexRow[], baseUrl: string): string {
  const e = escapeHtml;
  const body =
    rows.length === 0
      ? "<p>No remotes yet. Add one with <code>reposync add-remote NAME OWNER/REPO</code>.</p>"
      : `<table>
<thead><tr><th>remote</th><th>GitHub repository</th><th>packages</th><th>last sync</th><th>packages served</th><th>.repo file</th></tr></thead>
<tbody>
${rows
  .map(
    ({ remote, packages, sync }) =>
      `<tr><td>${e(remote.name)}</td><td>${e(remote.repo)}</td><td>${packages}</td>` +
      `<td>${e(lastSync(sync))}</td><td>${remote.packageMode === "cache" ? "from the cache" : "by redirect to GitHub"}</td>` +
      `<td><a href="${e(`/${remote.name}.repo`)}">${e(`${remote.name}.repo`)}</a></td></tr>`,
  )
  .join("\n")}
</tbody>
</table>`;
  const example = rows[0]?.remote.name ?? "NAME";
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>reposync</title>
<style>body{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}code,pre{background:#f4f4f4}</style>
</head>
<body>
<h1>reposync</h1>
<p>dnf repositories made from the <code>.rpm</code> assets of GitHub releases.</p>
${body}
<h2>How to use a repository</h2>
<pre>
# dnf 4
sudo dnf config-manager --add-repo ${e(`${baseUrl}/${example}.repo`)}
# dnf 5
sudo dnf config-manager addrepo --from-repofile=${e(`${baseUrl}/${example}.repo`)}
# or by hand
curl -fsSL ${e(`${baseUrl}/${example}.repo`)} | sudo tee /etc/yum.repos.d/${e(example)}.repo
</pre>
</body>
</html>
`;
}
