import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { openDatabase } from "../../src/store/open-database.js";
import { sql } from "../../src/store/port.js";
import { claimSyncLease } from "../../src/store/sync-lease.js";
import { runCliInProcess } from "../support/cli-in-process.js";
import { createTestSchema, havePostgres } from "../support/postgres.js";

const PG = await havePostgres();

const reposync = runCliInProcess;

const TABLES = [
  "remotes",
  "github_rpm_sync_state",
  "release_assets",
  "packages",
  "repodata_snapshots",
  "snapshot_files",
  "package_files",
];

describe.each(PG ? ["sqlite", "postgres"] : ["sqlite"])("remote commands on %s", (dialect) => {
  let db: string[] = [];
  let cleanup: () => Promise<void>;

  beforeEach(async () => {
    if (dialect === "postgres") {
      const schema = await createTestSchema();
      db = ["--database", schema.url];
      cleanup = schema.drop;
    } else {
      const dir = mkdtempSync(join(tmpdir(), "reposync-cli-"));
      db = ["--data-dir", dir];
      cleanup = async () => rmSync(dir, { recursive: true, force: true });
    }
  });
  afterEach(async () => cleanup());

  async function listJson(): Promise<Record<string, unknown>[]> {
    const r = await reposync("list-remotes", "--json", ...db);
    expect(r.code).toBe(0);
    return JSON.parse(r.out) as Record<string, unknown>[];
  }

  it("round-trips every add-remote option through list-remotes --json", async () => {
    const added = await reposync(
      "add-remote",
      "acme",
      "acme/tools",
      "--include",
      "*.x86_64.rpm",
      "--include",
      "*.noarch.rpm",
      "--exclude",
      "*-debuginfo-*",
      "--exclude",
      "*-debugsource-*",
      "--prereleases",
      "--interval",
      "90s",
      "--packages",
      "redirect",
      "--api-url",
      "https://ghe.example.test/api/v3/",
      "--token-env",
      "ACME_TOKEN",
      ...db,
    );
    expect(added).toMatchObject({ code: 0, err: "" });
    expect(added.out).toContain("added remote acme");
    const plain = await reposync(...db, "add-remote", "plain", "Owner-1/repo.name_x");
    expect(plain.code).toBe(0);

    const [acme, other] = await listJson();
    expect(acme).toMatchObject({
      name: "acme",
      repo: "acme/tools",
      include: ["*.x86_64.rpm", "*.noarch.rpm"],
      exclude: ["*-debuginfo-*", "*-debugsource-*"],
      prereleases: true,
      interval: "1m30s",
      intervalMs: 90_000,
      packages: "redirect",
      apiUrl: "https://ghe.example.test/api/v3",
      tokenEnv: "ACME_TOKEN",
    });
    expect(Number.isNaN(Date.parse(String(acme?.createdAt)))).toBe(false);
    expect(other).toMatchObject({
      name: "plain",
      repo: "Owner-1/repo.name_x",
      include: [],
      exclude: [],
      prereleases: false,
      interval: "5m",
      packages: "cache",
      apiUrl: null,
      tokenEnv: null,
    });
  });

  it("prints a table with a header and one line per remote", async () => {
    await reposync("add-remote", "acme", "acme/tools", "--include", "*.rpm", ...db);
    const r = await reposync("list-remotes", ...db);
    const lines = r.out.trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^NAME\s+REPO\s+INTERVAL\s+PACKAGES/);
    expect(lines[1]).toMatch(/^acme\s+acme\/tools\s+5m\s+cache/);
  });

  it("says so when there are no remotes, and prints [] with --json", async () => {
    expect((await reposync("list-remotes", ...db)).out).toContain("no remotes yet");
    expect(await listJson()).toEqual([]);
  });

  it("remove-remote leaves no rows of the remote in any table", async () => {
    await reposync("add-remote", "acme", "acme/tools", ...db);
    await reposync("add-remote", "keep", "acme/keep", ...db);
    const url = db[0] === "--database" ? (db[1] as string) : join(db[1] as string, "reposync.db");
    const store = await openDatabase(url);
    try {
      expect(await claimSyncLease(store, { remote: "acme", owner: "w" })).toBeDefined();
      await store.exec(
        sql(
          "insert into repodata_snapshots (remote_name, revision, created_at, repomd) values ($1, 'r', 1, $2)",
          "acme",
          new Uint8Array([1]),
        ),
      );
      const r = await reposync("remove-remote", "acme", ...db);
      expect(r).toMatchObject({ code: 0, err: "", out: "removed remote acme\n" });
      for (const table of TABLES) {
        const col = table === "remotes" ? "name" : "remote_name";
        const [row] = await store.query<{ n: number }>(
          sql(`select count(*) as n from ${table} where ${col} = $1`, "acme"),
        );
        expect(Number(row?.n), table).toBe(0);
      }
      expect((await listJson()).map((x) => x.name)).toEqual(["keep"]);
    } finally {
      await store.close();
    }
  });

  it.each([
    ["a bad name", ["add-remote", "Bad_Name", "acme/tools"], 2, "remote name"],
    ["a bad repository", ["add-remote", "ok", "acme"], 2, "repository"],
    ["a bad glob", ["add-remote", "ok", "acme/tools", "--include", "*.{rpm"], 2, "--include"],
    ["a bad exclude glob", ["add-remote", "ok", "acme/tools", "--exclude", "[x"], 2, "--exclude"],
    ["a bad duration", ["add-remote", "ok", "acme/tools", "--interval", "5"], 2, "--interval"],
    [
      "a too short interval",
      ["add-remote", "ok", "acme/tools", "--interval", "1s"],
      2,
      "--interval",
    ],
    [
      "a bad package mode",
      ["add-remote", "ok", "acme/tools", "--packages", "mirror"],
      2,
      "--packages",
    ],
    [
      "a token in --token-env",
      ["add-remote", "ok", "acme/tools", "--token-env", "ghp_0123456789abcdef"],
      2,
      "--token-env",
    ],
    ["a bad API URL", ["add-remote", "ok", "acme/tools", "--api-url", "ftp://x"], 2, "--api-url"],
    ["an unknown remote", ["remove-remote", "nope"], 1, 'no remote named "nope"'],
    ["a bad name to remove", ["remove-remote", "../etc"], 2, "remote name"],
  ])("refuses %s with one line and a non-zero exit", async (_what, args, code, needle) => {
    const r = await reposync(...args, ...db);
    expect(r.code).toBe(code);
    expect(r.out).toBe("");
    expect(r.err).toMatch(/^reposync: [^\n]+\n$/);
    expect(r.err).toContain(needle);
    expect(await listJson()).toEqual([]);
  });

  it("refuses a duplicate name with one line, keeping the first remote", async () => {
    await reposync("add-remote", "acme", "acme/tools", ...db);
    const r = await reposync("add-remote", "acme", "other/repo", ...db);
    expect(r.code).toBe(1);
    expect(r.err).toBe('reposync: remote "acme" already exists\n');
    expect((await listJson()).map((x) => x.repo)).toEqual(["acme/tools"]);
  });
});

describe("remote commands on a database they cannot use", () => {
  it.each(["list-remotes", "migrate", "remove-remote x"])(
    "%s: an unreachable Postgres is one line naming the URL without its password",
    async (cmd) => {
      const r = await reposync(
        ...cmd.split(" "),
        "--database",
        "postgres://me:hunter2@127.0.0.1:1/db",
      );
      expect(r.code).toBe(1);
      expect(r.err).toMatch(
        /^reposync: cannot reach database postgres:\/\/me:\*\*\*@127\.0\.0\.1:1\/db: [^\n]+\n$/,
      );
      expect(r.err).not.toContain("hunter2");
    },
  );

  it("an unreadable SQLite file is one line naming the file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "reposync-cli-bad-"));
    try {
      const file = join(dir, "reposync.db");
      writeFileSync(file, "not a database at all, ".repeat(50));
      for (const args of [["add-remote", "ok", "acme/tools"], ["list-remotes"], ["migrate"]]) {
        const r = await reposync(...args, "--data-dir", dir);
        expect(r.code).toBe(1);
        expect(r.err).toMatch(/^reposync: cannot open SQLite database [^\n]+\n$/);
        expect(r.err).toContain(file);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a bad setting in the environment is one line naming the variable", async () => {
    vi.stubEnv("GITHUB_SYNC_WORKERS", "lots");
    try {
      const r = await reposync("list-remotes", "--database", ":memory:");
      expect(r.code).toBe(2);
      expect(r.err).toMatch(
        /^reposync: invalid configuration: GITHUB_SYNC_WORKERS="lots"[^\n]*\n$/,
      );
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it("takes --database over REPOSYNC_DATABASE", async () => {
    const dir = mkdtempSync(join(tmpdir(), "reposync-cli-env-"));
    vi.stubEnv("REPOSYNC_DATABASE", join(dir, "from-env.db"));
    try {
      expect((await reposync("add-remote", "a", "acme/a")).code).toBe(0);
      expect(
        (await reposync("add-remote", "b", "acme/b", "--database", join(dir, "from-flag.db"))).code,
      ).toBe(0);
      const env = JSON.parse((await reposync("list-remotes", "--json")).out) as { name: string }[];
      expect(env.map((x) => x.name)).toEqual(["a"]);
    } finally {
      vi.unstubAllEnvs();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
