import { describe, expect, it } from "vitest";
import { isReposyncError } from "../../src/errors.js";
import { type Queryable, sql } from "../../src/store/port.js";
import type { NewRemote } from "../../src/store/remote-input.js";
import {
  addRemote,
  findRemote,
  getRemote,
  listRemotes,
  removeRemote,
} from "../../src/store/remotes.js";
import { claimSyncLease } from "../../src/store/sync-lease.js";
import { plainRemote } from "../support/fixtures.js";
import { DIALECTS, useFreshDatabase } from "./harness.js";

const FULL: NewRemote = {
  name: "acme",
  repo: "acme/tools",
  apiUrl: "https://ghe.example.test/api/v3",
  tokenEnv: "ACME_TOKEN",
  include: ["*.x86_64.rpm", "*.noarch.rpm"],
  exclude: ["*-debuginfo-*"],
  prereleases: true,
  intervalMs: 90_000,
  packageMode: "redirect",
};

const PLAIN = plainRemote("plain", FULL.repo);

/** Rows of one remote in every table it owns, by table. */
async function rowsOf(db: Queryable, remote: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [table, column] of [
    ["remotes", "name"],
    ["github_rpm_sync_state", "remote_name"],
    ["release_assets", "remote_name"],
    ["packages", "remote_name"],
    ["repodata_snapshots", "remote_name"],
    ["snapshot_files", "remote_name"],
    ["package_files", "remote_name"],
  ] as const) {
    const [r] = await db.query<{ n: number }>(
      sql(`select count(*) as n from ${table} where ${column} = $1`, remote),
    );
    out[table] = Number(r?.n);
  }
  return out;
}

/** Fills every table with one row for `remote`, as a sync and a cache fill would. */
async function fill(db: Queryable, remote: string): Promise<void> {
  expect(await claimSyncLease(db, { remote, owner: "w" })).toBeDefined();
  await db.exec(
    sql(
      `insert into release_assets (remote_name, asset_id, name, size, updated_at, digest, state,
         download_url, release_id, release_tag, prerelease, derive_error)
       values ($1, 7, 'a-1-1.x86_64.rpm', 100, '2026-01-01T00:00:00Z', null, 'uploaded',
         'https://example.test/a.rpm', 3, 'v1', $2, null)`,
      remote,
      false,
    ),
  );
  await db.exec(
    sql(
      `insert into packages (remote_name, asset_id, pkgid, location_href, name, arch, epoch, version,
         release, file_time, size_package, header_start, header_end, primary_xml, filelists_xml, other_xml)
       values ($1, 7, 'abc', 'packages/7/a-1-1.x86_64.rpm', 'a', 'x86_64', '0', '1', '1', 1, 100,
         96, 900, '<package/>', '<package/>', '<package/>')`,
      remote,
    ),
  );
  await db.exec(
    sql(
      "insert into repodata_snapshots (remote_name, revision, created_at, repomd) values ($1, 'r1', 1, $2)",
      remote,
      new Uint8Array([60, 62]),
    ),
  );
  await db.exec(
    sql(
      "insert into snapshot_files (remote_name, name, revision, bytes, created_at) values ($1, 'p.xml.gz', 'r1', $2, 1)",
      remote,
      new Uint8Array([31, 139]),
    ),
  );
  await db.exec(
    sql(
      "insert into package_files (remote_name, asset_id, sha256, size, path, stored_at) values ($1, 7, 'abc', 100, 'ab/abc', 1)",
      remote,
    ),
  );
}

describe.each(DIALECTS)("remotes on %s", (dialect) => {
  const t = useFreshDatabase(dialect);

  it("stores every field and reads it back as given", async () => {
    const added = await addRemote(t.db(), FULL);
    expect(added).toMatchObject(FULL);
    expect(added.createdAt).toBeGreaterThan(Date.parse("2020-01-01"));
    expect(await getRemote(t.db(), "acme")).toEqual(added);
    await addRemote(t.db(), PLAIN);
    expect(await findRemote(t.db(), "plain")).toMatchObject(PLAIN);
  });

  it("lists remotes by name", async () => {
    await addRemote(t.db(), { ...PLAIN, name: "zeta" });
    await addRemote(t.db(), { ...PLAIN, name: "alpha" });
    expect((await listRemotes(t.db())).map((r) => r.name)).toEqual(["alpha", "zeta"]);
  });

  it("refuses a second remote with a taken name as CONFLICT, keeping the first", async () => {
    await addRemote(t.db(), FULL);
    const err = await addRemote(t.db(), { ...PLAIN, name: "acme" }).catch((e: unknown) => e);
    expect(isReposyncError(err, "CONFLICT")).toBe(true);
    expect((err as Error).message).toContain('"acme"');
    expect(await getRemote(t.db(), "acme")).toMatchObject(FULL);
  });

  it("validates before storing", async () => {
    const err = await addRemote(t.db(), { ...FULL, name: "Bad Name" }).catch((e: unknown) => e);
    expect(isReposyncError(err, "USAGE")).toBe(true);
    expect(await listRemotes(t.db())).toEqual([]);
  });

  it("reports an unknown remote as NOT_FOUND", async () => {
    expect(await findRemote(t.db(), "nope")).toBeUndefined();
    await expect(getRemote(t.db(), "nope")).rejects.toSatisfy((e) =>
      isReposyncError(e, "NOT_FOUND"),
    );
    await expect(removeRemote(t.db(), "nope")).rejects.toSatisfy((e) =>
      isReposyncError(e, "NOT_FOUND"),
    );
  });

  it("removes a remote with every row it owns, and nothing of another remote", async () => {
    await addRemote(t.db(), FULL);
    await addRemote(t.db(), PLAIN);
    await fill(t.db(), "acme");
    await fill(t.db(), "plain");
    const full = await rowsOf(t.db(), "acme");
    expect(Object.values(full).every((n) => n === 1)).toBe(true);

    await removeRemote(t.db(), "acme");
    expect(Object.values(await rowsOf(t.db(), "acme")).every((n) => n === 0)).toBe(true);
    expect(await rowsOf(t.db(), "plain")).toEqual(full);
  });
});
