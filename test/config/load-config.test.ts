import { availableParallelism } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import { SETTINGS } from "../../src/config/schema.js";
import { isReposyncError } from "../../src/errors.js";

function failure(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    expect(isReposyncError(err, "CONFIG_INVALID")).toBe(true);
    return err as Error;
  }
  throw new Error("expected a CONFIG_INVALID error");
}

describe("loadConfig", () => {
  it("uses the documented defaults when nothing is set", () => {
    const c = loadConfig({ env: {} });
    expect(c.githubApiUrl).toBe("https://api.github.com");
    expect(c.githubSyncRate).toBe(1);
    expect(c.githubSyncBurst).toBe(5);
    expect(c.githubSyncWorkers).toBe(3);
    expect(c.githubSyncPollInterval).toBe(60_000);
    expect(c.coldWait).toBe(10_000);
    expect(c.listen).toEqual({ host: "127.0.0.1", port: 8080 });
    expect(c.dataDir).toBe(resolve(".reposync"));
    expect(c.database).toBe(join(resolve(".reposync"), "reposync.db"));
    expect(c.githubToken).toBeUndefined();
    expect(c.adminToken).toBeUndefined();
  });

  it("reads the HTTP processes of serve: 1 by default, a number, or auto for one per CPU", () => {
    expect(loadConfig({ env: {} }).workers).toBe(1);
    expect(loadConfig({ env: { REPOSYNC_WORKERS: "3" } }).workers).toBe(3);
    expect(loadConfig({ env: {}, flags: { workers: "AUTO" } }).workers).toBe(
      Math.min(64, availableParallelism()),
    );
    for (const bad of ["0", "65", "-1", "2.5", "many"]) {
      const err = failure(() => loadConfig({ env: { REPOSYNC_WORKERS: bad } }));
      expect(err.message).toContain("REPOSYNC_WORKERS");
      expect(err.message).toContain("expected auto or a whole number from 1 to 64");
    }
  });

  it("reads the environment, and flags win over it", () => {
    const env = {
      GITHUB_SYNC_RATE: "0.5",
      GITHUB_SYNC_WORKERS: "7",
      REPOSYNC_COLD_WAIT: "3s",
      GITHUB_TOKEN: "tok",
      REPOSYNC_ADMIN_TOKEN: "adm",
      REPOSYNC_LISTEN: "[::1]:9000",
    };
    const c = loadConfig({ env, flags: { githubSyncWorkers: "2", listen: ":8081" } });
    expect(c.githubSyncRate).toBe(0.5);
    expect(c.githubSyncWorkers).toBe(2);
    expect(c.coldWait).toBe(3000);
    expect(c.githubToken).toBe("tok");
    expect(c.adminToken).toBe("adm");
    expect(c.listen).toEqual({ host: "0.0.0.0", port: 8081 });
    expect(loadConfig({ env }).listen).toEqual({ host: "::1", port: 9000 });
  });

  it("puts the default database in the data dir, STATE_DIRECTORY first, --data-dir over it", () => {
    const env = { STATE_DIRECTORY: "/var/lib/reposync:/var/lib/other" };
    expect(loadConfig({ env }).database).toBe("/var/lib/reposync/reposync.db");
    expect(loadConfig({ env, flags: { dataDir: "/srv/rs" } }).database).toBe("/srv/rs/reposync.db");
  });

  it("takes --database over REPOSYNC_DATABASE over the data-dir default", () => {
    const env = { REPOSYNC_DATABASE: "postgres://u@db/x", STATE_DIRECTORY: "/s" };
    expect(loadConfig({ env }).database).toBe("postgres://u@db/x");
    expect(loadConfig({ env, flags: { database: "/tmp/a.db" } }).database).toBe("/tmp/a.db");
  });

  it("treats an empty variable as unset", () => {
    expect(loadConfig({ env: { GITHUB_TOKEN: "", GITHUB_SYNC_RATE: "" } }).githubSyncRate).toBe(1);
  });

  it("reports every bad value at once, each by the name it came from", () => {
    const err = failure(() =>
      loadConfig({
        env: {
          GITHUB_SYNC_RATE: "fast",
          GITHUB_SYNC_POLL_INTERVAL: "60",
          GITHUB_API_URL: "ftp://x",
        },
        flags: { githubSyncBurst: "0", listen: "localhost" },
      }),
    );
    for (const name of [
      'GITHUB_SYNC_RATE="fast"',
      'GITHUB_SYNC_POLL_INTERVAL="60"',
      'GITHUB_API_URL="ftp://x"',
      '--github-sync-burst="0"',
      '--listen="localhost"',
    ]) {
      expect(err.message).toContain(name);
    }
    expect(err.message).not.toContain("\n");
  });

  it("returns a frozen object", () => {
    const c = loadConfig({ env: {} });
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.listen)).toBe(true);
  });

  it("gives every setting help text and a way in, and no flag for secrets", () => {
    for (const [key, s] of Object.entries(SETTINGS)) {
      expect(s.help.length, key).toBeGreaterThan(10);
      expect(s.env !== undefined || s.flag !== undefined, key).toBe(true);
    }
    expect("flag" in SETTINGS.githubToken).toBe(false);
    expect("flag" in SETTINGS.adminToken).toBe(false);
  });
});
