#!/usr/bin/env bash
# Installs everything the tests need on a fresh Debian machine, then runs every check:
# typecheck, lint and format, and the whole test suite (unit, SQLite, Postgres, real dnf,
# createrepo_c and systemd-analyze). Run as root (or with sudo rights for apt-get). `CI=true` makes a missing tool or
# server fail the tests instead of skipping them.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for tool in rpm:rpm rpmbuild:rpm createrepo_c:createrepo-c dnf:dnf systemd-analyze:systemd; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need_apt+=("${tool##*:}")
done
if [ "${#need_apt[@]}" -gt 0 ]; then
  echo "==> installing ${need_apt[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq $(printf '%s\n' "${need_apt[@]}" | sort -u) >/dev/null
fi

# Postgres on 127.0.0.1:5432 (trust auth). Start the local cluster when it is down.
if ! (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    echo "==> starting Postgres"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start
  else
    echo "Postgres is not running on 127.0.0.1:5432 and no local cluster was found" >&2
  fi
fi

echo "==> npm ci"
npm ci --no-audit --no-fund

echo "==> typecheck, lint"
npm run typecheck
npm run lint

echo "==> tests"
report="$(mktemp -d)/vitest.json"
status=0
npm test -- --reporter=default --reporter=json --outputFile.json="$report" || status=$?
# One plain closing line that any reader of the log understands.
if [ -s "$report" ]; then
  node -e '
    const r = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"));
    const skipped = r.numPendingTests + r.numTodoTests;
    console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed` + (skipped ? `, ${skipped} skipped` : ""));
  ' "$report"
fi
exit "$status"
