import type { Remote } from "../store/remote-input.js";

/**
 * A ready dnf .repo file for `remote` served at `baseUrl`. `metadata_expire` follows the remote's
 * check interval: dnf asking more often finds nothing new, less often serves stale packages.
 * gpgcheck is off because GitHub releases carry no repository signature; dnf still verifies
 * every package's sha256 against the repodata.
 */
export function repoFileFor(remote: Remote, baseUrl: string): string {
  const url = `${baseUrl}/${remote.name}.repo`;
  const seconds = Math.max(1, Math.round(remote.intervalMs / 1000));
  return [
    `# ${remote.name}: the .rpm assets of GitHub releases of ${remote.repo}, served by reposync.`,
    "# Install this file with:",
    `#   dnf 4: dnf config-manager --add-repo ${url}`,
    `#   dnf 5: dnf config-manager addrepo --from-repofile=${url}`,
    `#   or:    curl -fsSL ${url} | sudo tee /etc/yum.repos.d/${remote.name}.repo`,
    `[${remote.name}]`,
    `name=${remote.name} (${remote.repo} via reposync)`,
    `baseurl=${baseUrl}/${remote.name}/`,
    "enabled=1",
    "gpgcheck=0",
    "repo_gpgcheck=0",
    `metadata_expire=${seconds}`,
    "",
  ].join("\n");
}
