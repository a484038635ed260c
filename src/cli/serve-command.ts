import type { Command } from "commander";
import type { Logger } from "pino";
import { addSettingOptions, configFor } from "./store-options.js";

/** systemd's default TimeoutStopSec is 90 s; ours promises 10 s and enforces it here. */
const STOP_DEADLINE_MS = 10_000;

const HELP_AFTER = `
Serves every remote at http://HOST:PORT/<remote>/ (dnf's baseurl), a ready .repo file at
/<remote>.repo, an index page at /, /healthz, /readyz and /metrics, and the admin API under
/api/ when REPOSYNC_ADMIN_TOKEN is set. The syncer in the same process keeps the remotes
current. SIGTERM or SIGINT stops it cleanly within 10 seconds.

One process answers HTTP by default. --workers N (or auto: one per CPU) starts N processes
that share the port, for a machine whose clients ask faster than one CPU answers; the first
process still holds the only syncer, package cache and GitHub token bucket, so GitHub sees
no more requests than with one.

Examples:
  $ reposync serve
  $ reposync serve --listen 0.0.0.0:8080 --cold-wait 20s
  $ reposync serve --workers auto --log-level warn
`;

/** What serve runs until a signal: one process, a cluster's primary, or one of its workers. */
interface Service {
  readonly logger: Logger;
  start(): Promise<string>;
  stop(): Promise<void>;
}

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
    "workers",
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
    const config = configFor(cmd);
    // Loaded here, not at the top: fastify, octokit and the syncer are serve's alone, and
    // every other command starts faster without them.
    const [{ default: cluster }, { pino }] = await Promise.all([
      import("node:cluster"),
      import("pino"),
    ]);
    const level = config.logLevel ?? "info";
    if (cluster.isWorker) {
      // A worker of `serve --workers N`: it runs with the primary's argv and environment.
      const { ClusterWorker } = await import("../cluster/worker.js");
      const { ipcChannel } = await import("../cluster/rpc.js");
      const channel = ipcChannel(process);
      const logger = pino({ name: "reposync", level }).child({ worker: cluster.worker?.id });
      const worker = new ClusterWorker({ config, logger, channel });
      channel.listen((message) => {
        if (message.t === "stop") stopOnce("stop");
      });
      // When the primary dies, node:cluster itself ends this worker at once (its IPC channel
      // dropped without a disconnect of ours): nobody is left to fetch packages or sync, and
      // test/e2e/serve-workers.test.ts checks that no worker outlives it.
      const stopOnce = runUntilSignal({ logger, stop: () => worker.stop() });
      try {
        const url = await worker.start();
        channel.send({ t: "listening", url });
      } catch (err) {
        // The primary reports it (once, not once per worker) and stops the others.
        const { isReposyncError } = await import("../errors.js");
        const message = err instanceof Error ? err.message : String(err);
        await worker.stop().catch(() => {});
        await new Promise<void>((resolve) =>
          process.send?.(
            isReposyncError(err)
              ? { t: "failed", message, code: err.code }
              : { t: "failed", message },
            () => resolve(),
          ),
        );
        process.exit(1);
      }
      await stopOnce.done;
      // The IPC channel would keep this process alive; the primary waits for it to exit.
      if (process.connected) process.disconnect();
      return;
    }
    const logger = pino({ name: "reposync", level });
    let service: Service;
    if ((config.workers ?? 1) > 1) {
      const { ClusterPrimary } = await import("../cluster/primary.js");
      const primary = new ClusterPrimary({ config, logger, workers: config.workers ?? 1 });
      service = { logger, start: () => primary.start(), stop: () => primary.stop() };
    } else {
      const { Daemon } = await import("../daemon.js");
      const daemon = new Daemon({ config, logger });
      service = { logger, start: () => daemon.start(), stop: () => daemon.stop() };
    }
    const stopOnce = runUntilSignal(service);
    const url = await service.start();
    process.stdout.write(`reposync: serving on ${url}\n`);
    await stopOnce.done;
  });
}

/**
 * Stops `service` on the first SIGTERM or SIGINT (or a call of the returned function, for other
 * reasons to stop); `done` resolves once it has stopped. The promise of a bounded stop is kept
 * even if a part misbehaves: past the deadline the process leaves with a failure status rather
 * than waiting for systemd's KILL.
 */
function runUntilSignal(
  service: Pick<Service, "stop"> & { readonly logger: Logger },
): ((why: string) => void) & { readonly done: Promise<void> } {
  let resolveDone: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    resolveDone = resolve;
  });
  let stopping = false;
  const stop = (why: string) => {
    if (stopping) return;
    stopping = true;
    process.off("SIGTERM", stop);
    process.off("SIGINT", stop);
    service.logger.info({ why }, "stopping on request");
    setTimeout(() => {
      service.logger.error({ deadlineMs: STOP_DEADLINE_MS }, "stop took too long; exiting");
      process.exit(1);
    }, STOP_DEADLINE_MS).unref();
    service.stop().then(resolveDone, (err: unknown) => {
      service.logger.error({ err }, "stop failed");
      process.exit(1);
    });
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  return Object.assign(stop, { done });
}
