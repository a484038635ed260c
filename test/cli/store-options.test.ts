import { Command } from "commander";
import { describe, expect, it, vi } from "vitest";
import { addSettingOptions, configFor } from "../../src/cli/store-options.js";
import { SETTINGS, type SettingKey } from "../../src/config/schema.js";

describe("setting flags on a command", () => {
  it("name every option after its setting, so configFor finds what was typed", async () => {
    const keys = Object.keys(SETTINGS) as SettingKey[];
    const program = new Command("reposync").exitOverride();
    let seen: ReturnType<typeof configFor> | undefined;
    const serve = program.command("serve").action((_o: unknown, cmd: Command) => {
      seen = configFor(cmd);
    });
    addSettingOptions(serve, keys);
    await program.parseAsync(
      [
        "serve",
        "--data-dir",
        "/srv/rs",
        "--listen",
        "127.0.0.1:9999",
        "--github-api-url",
        "https://ghe.example.test/api/v3",
        "--github-sync-rate",
        "2.5",
        "--github-sync-burst",
        "9",
        "--github-sync-workers",
        "4",
        "--github-sync-poll-interval",
        "30s",
        "--cold-wait",
        "2s",
      ],
      { from: "user" },
    );
    expect(seen).toMatchObject({
      dataDir: "/srv/rs",
      database: "/srv/rs/reposync.db",
      listen: { host: "127.0.0.1", port: 9999 },
      githubApiUrl: "https://ghe.example.test/api/v3",
      githubSyncRate: 2.5,
      githubSyncBurst: 9,
      githubSyncWorkers: 4,
      githubSyncPollInterval: 30_000,
      coldWait: 2_000,
    });
    // Every flag-bearing setting got an option; secrets got none.
    const longs = serve.options.map((o) => o.long);
    for (const key of keys) {
      const flag = SETTINGS[key].flag;
      if (flag !== undefined) expect(longs).toContain(flag.split(" ")[0]);
    }
    expect(longs).not.toContain("--github-token");
  });

  it("leaves an untyped flag to the environment, and a typed one wins over it", () => {
    vi.stubEnv("GITHUB_SYNC_WORKERS", "6");
    try {
      const run = (args: string[]) => {
        const program = new Command("reposync").exitOverride();
        const cmd = program.command("serve");
        addSettingOptions(cmd, ["githubSyncWorkers"]);
        program.parse(["serve", ...args], { from: "user" });
        return configFor(cmd).githubSyncWorkers;
      };
      expect(run([])).toBe(6);
      expect(run(["--github-sync-workers", "2"])).toBe(2);
    } finally {
      vi.unstubAllEnvs();
    }
  });
});
