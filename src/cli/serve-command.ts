import type { Command } from "commander";
import { addSettingOptions, configFor } from "./store-options.js";

/** systemd's default TimeoutStopSec is 90 s; ours promises 10 s and enforces it here. */
const STOP_DEADLINE_MS = 10_000;

const HELP_AFTER = `
Serves every remote at http://HOST:PORT/<remote>/ (dnf's baseurl), a ready .repo file at
/<remote>.repo, an index page at /, /healthz, /readyz and /metrics, and the admin API under
/api/ when REPOSYNC_ADMIN_TOKEN is set. The syncer in the same process keeps the remotes
current. SIGTERM or SIGINT stops it cleanly within 10 seconds.

Examples:
  $ reposync serve
  $ reposync serve --listen 0.0.0.0:8080 --cold-wait 20s
`;

/** `reposync serve [--listen HOST:PORT] …`: the HTTP server and the syncer, until a signal. */
export function registerServeCommand(program: Command): void {
  const command = program
    .command("serve")
    .summary("serve the remotes to dnf over HTTP and keep them synced")
    .description(
      "Serve every remote as a dnf repository over HTTP, and sync them in the background.",
    )
    .addHelpText("after", HELP_AFTER);
  addSettingOptions(command, [
    "listen",
    "coldWait",
    "githubApiUrl",
    "githubSyncRate",
    "githubSyncBurst",
    "githubSyncWorkers",
    "githubSyncPollInterval",
    "logLevel",
  ]);
  command.action(async (_opts: unknown, cmd: Command) => {
    // Every bad setting is reported here, before anything opens or listens.
    // Loaded here, not at the top: fastify, octokit and the syncer are serve's alone, and
    // every other command starts faster without them.
    const { Daemon } = await import("../daemon.js");
    const daemon = new Daemon({ config: configFor(cmd) });
    const url = await daemon.start();
    process.stdout.write(`reposync: serving on ${url}\n`);
    await new Promise<void>((resolve) => {
      const onSignal = (signal: NodeJS.Signals) => {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
        daemon.logger.info({ signal }, "signal received");
        // The promise of a bounded stop is kept even if a part misbehaves: past the
        // deadline the process leaves with a failure status rather than waiting for a KILL.
        setTimeout(() => {
          daemon.logger.error({ deadlineMs: STOP_DEADLINE_MS }, "stop took too long; exiting");
          process.exit(1);
        }, STOP_DEADLINE_MS).unref();
        daemon.stop().then(resolve, (err: unknown) => {
          daemon.logger.error({ err }, "stop failed");
          process.exit(1);
        });
      };
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    });
  });
}
