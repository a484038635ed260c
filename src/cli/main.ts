import { Command, CommanderError } from "commander";
import { isReposyncError } from "../errors.js";
import { registerAddRemoteCommand } from "./add-remote-command.js";
import { registerIndexCommand } from "./index-command.js";
import { registerListRemotesCommand } from "./list-remotes-command.js";
import { registerMigrateCommand } from "./migrate-command.js";
import { registerRemoveRemoteCommand } from "./remove-remote-command.js";
import { registerServeCommand } from "./serve-command.js";
import { registerStatusCommand } from "./status-command.js";
import { addStoreOptions } from "./store-options.js";
import { registerSyncCommand } from "./sync-command.js";

/** Exit statuses: 0 ok, 1 a failure the message explains, 2 bad usage or input. */
const USAGE_CODES = new Set(["USAGE", "CONFIG_INVALID"]);

/** Builds the commander program; each command lives in its own file and registers itself. */
export function buildProgram(): Command {
  const program = new Command("reposync")
    .description(
      "Turn GitHub releases that carry .rpm assets into dnf repositories.\n\n" +
        "Run `reposync serve` behind dnf, add a repository with `reposync add-remote`,\n" +
        "or build repodata for a local folder with `reposync index DIR`.",
    )
    .showHelpAfterError("(run with --help for usage)")
    .exitOverride();
  addStoreOptions(program);
  registerIndexCommand(program);
  registerAddRemoteCommand(program);
  registerRemoveRemoteCommand(program);
  registerListRemotesCommand(program);
  registerMigrateCommand(program);
  registerSyncCommand(program);
  registerStatusCommand(program);
  registerServeCommand(program);
  return program;
}

/**
 * Runs the CLI and returns the exit status. Expected failures print one line naming the bad
 * input and what to do; only a bug prints a stack trace.
 */
export async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv]);
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // commander already printed its message (or the help text).
      return err.exitCode === 0 ? 0 : 2;
    }
    if (isReposyncError(err)) {
      process.stderr.write(`reposync: ${err.message}\n`);
      return USAGE_CODES.has(err.code) ? 2 : 1;
    }
    process.stderr.write(
      `reposync: internal error (please report it): ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    return 70;
  }
}
