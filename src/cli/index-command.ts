import { resolve } from "node:path";
import { Presets, SingleBar } from "cli-progress";
import type { Command } from "commander";
import { ReposyncError } from "../errors.js";
import { indexDirectory } from "../repodata/index-directory.js";

const DEFAULT_CHANGELOG_LIMIT = 10;

/** Parses `--changelog-limit`: a non-negative integer, or a USAGE error naming flag and value. */
export function parseChangelogLimit(value: string): number {
  if (!/^[0-9]+$/.test(value.trim())) {
    throw new ReposyncError(
      "USAGE",
      `--changelog-limit must be a non-negative integer (0 keeps no changelog), got "${value}"`,
    );
  }
  return Number.parseInt(value, 10);
}

const HELP_AFTER = `
What it does:
  Finds every *.rpm under DIR (recursively; DIR/repodata is ignored), reads each
  package's header and sha256, and writes DIR/repodata (repomd.xml and gzip'd
  primary, filelists and other XML) field for field as \`createrepo_c --no-database
  DIR\` would. Each location href is the package's path relative to DIR, so point
  dnf's baseurl at DIR itself.

  The new repodata is built beside the old one and swapped in at the end: a
  crash or a Ctrl-C never leaves a half-written DIR/repodata. A file that is not
  a readable RPM is skipped with a line saying why; the others are still indexed.
  Indexing the same files again writes the same bytes (the revision is the
  newest package's mtime, not the clock).

Examples:
  $ reposync index ./my-repo
  $ reposync index ./my-repo --changelog-limit 0     # smallest other.xml
  $ dnf --repofrompath=local,file://$PWD/my-repo --repo=local list available
`;

/** Registers `reposync index DIR`: build repodata for a local folder of RPMs. */
export function registerIndexCommand(program: Command): void {
  program
    .command("index")
    .summary("write DIR/repodata for the RPMs in DIR, as createrepo_c would")
    .description(
      "Write DIR/repodata for the .rpm files under DIR, as `createrepo_c --no-database DIR` would.",
    )
    .argument("<dir>", "folder holding the .rpm files (searched recursively)")
    .option(
      "--changelog-limit <n>",
      "changelog entries kept per package in other.xml (a non-negative integer)",
      String(DEFAULT_CHANGELOG_LIMIT),
    )
    .addHelpText("after", HELP_AFTER)
    .action(async (dir: string, opts: { changelogLimit: string }) => {
      const changelogLimit = parseChangelogLimit(opts.changelogLimit);
      await runIndex(dir, changelogLimit);
    });
}

async function runIndex(dir: string, changelogLimit: number): Promise<void> {
  const absolute = resolve(dir);
  // A bar only for a person watching; scripts and logs get the summary line alone.
  const bar = process.stderr.isTTY
    ? new SingleBar(
        {
          format: "indexing [{bar}] {value}/{total} packages",
          stream: process.stderr,
          clearOnComplete: true,
        },
        Presets.shades_classic,
      )
    : null;
  let started = false;
  const skips: string[] = [];
  try {
    const result = await indexDirectory(absolute, {
      changelogLimit,
      onSkip: (file, reason) => {
        const line = `skipped ${file}: ${reason}`;
        // While the bar is drawn, a line written beneath it would be overdrawn: print skips after.
        if (bar === null) process.stderr.write(`${line}\n`);
        else skips.push(line);
      },
      onProgress: (done, total) => {
        if (bar === null) return;
        if (!started) {
          bar.start(total, done);
          started = true;
        } else {
          bar.update(done);
        }
      },
    });
    bar?.stop();
    started = false;
    for (const line of skips) process.stderr.write(`${line}\n`);
    process.stdout.write(
      `indexed ${result.packages} packages, skipped ${result.skipped}, wrote ${result.repodataDir}\n`,
    );
  } finally {
    if (started) bar?.stop();
  }
}
