import type { Command } from "commander";
import { checkRemoteName } from "../store/remote-input.js";
import { removeRemote } from "../store/remotes.js";
import { withStore } from "./store-options.js";

/** `reposync remove-remote NAME`: removes a remote and everything stored for it. */
export function registerRemoveRemoteCommand(program: Command): void {
  program
    .command("remove-remote")
    .description("Remove a remote with its packages, repodata and sync state.")
    .argument("<name>", "the remote to remove")
    .action(async (name: string, _opts: unknown, command: Command) => {
      checkRemoteName(name);
      await withStore(command, (db) => removeRemote(db, name));
      process.stdout.write(`removed remote ${name}\n`);
    });
}
