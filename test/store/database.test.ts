import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { isReposyncError } from "../../src/errors.js";
import { openDatabase } from "../../src/store/open-database.js";
import { sql } from "../../src/store/port.js";
import { addRemote, listRemotes } from "../../src/store/remotes.js";
import { plainRemote } from "../support/fixtures.js";
import { POSTGRES_URL } from "../support/postgres.js";
import { DIALECTS, PG, useFreshDatabase } from "./harness.js";

const REMOTE = plainRemote("demo");

async function failureOf(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error("expected a failure");
}

describe.each(DIALECTS)("the database port on %s", (dialect) => {
  const t = useFreshDatabase(dialect);

  it("binds $n placeholders in any order and repeated", async () => {
    const rows = await t.db().query(sql("select $2 as b, $1 as a, $1 as again", "one", "two"));
    expect(rows).toEqual([{ b: "two", a: "one", again: "one" }]);
  });

  it("stores bytes and reads back the same bytes", async () => {
    await addRemote(t.db(), REMOTE);
    const bytes = new Uint8Array([0, 1, 2, 255, 254, 0, 10]);
    await t
      .db()
      .exec(
        sql(
          "insert into repodata_snapshots (remote_name, revision, created_at, repomd) values ($1, $2, $3, $4)",
          "demo",
          "r1",
          1,
          bytes,
        ),
      );
    const [row] = await t
      .db()
      .query<{ repomd: Uint8Array }>(
        sql("select repomd from repodata_snapshots where remote_name = $1", "demo"),
      );
    expect(Buffer.from(row!.repomd)).toEqual(Buffer.from(bytes));
  });

  it("commits a transaction that resolves", async () => {
    await t.db().transaction((tx) => addRemote(tx, REMOTE));
    expect((await listRemotes(t.db())).map((r) => r.name)).toEqual(["demo"]);
  });

  it("rolls back a transaction that throws, and others never see its writes", async () => {
    let inside!: () => void;
    const wrote = new Promise<void>((r) => {
      inside = r;
    });
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const tx = t.db().transaction(async (q) => {
      await addRemote(q, REMOTE);
      inside();
      await gate;
      throw new Error("abort");
    });
    await wrote;
    // Another caller's statement, issued while the transaction is open with its write done.
    const outside = listRemotes(t.db());
    release();
    await expect(tx).rejects.toThrow("abort");
    expect(await outside).toEqual([]);
    expect(await listRemotes(t.db())).toEqual([]);
  });

  it("refuses (SQLite) or runs (Postgres) a statement on the database inside its own transaction, without hanging", async () => {
    const inner = t.db().transaction(async () => listRemotes(t.db()));
    if (dialect === "sqlite") {
      await expect(inner).rejects.toSatisfy((e) => isReposyncError(e, "DB_ERROR"));
    } else {
      await expect(inner).resolves.toEqual([]);
    }
    // The database still works afterwards.
    expect(await listRemotes(t.db())).toEqual([]);
  });

  it("maps a failing statement to DB_ERROR naming the database", async () => {
    const err = await failureOf(t.db().query(sql("select * from no_such_table")));
    expect(isReposyncError(err, "DB_ERROR")).toBe(true);
    expect(err.message).toContain("no_such_table");
  });
});

describe("opening a SQLite database", () => {
  const dir = mkdtempSync(join(tmpdir(), "reposync-open-"));

  it("creates the file and its folder", async () => {
    const db = await openDatabase(join(dir, "a", "b", "x.db"));
    expect(db.dialect).toBe("sqlite");
    await db.close();
    await db.close(); // idempotent
  });

  it("accepts a sqlite: prefix in front of the path", async () => {
    const file = join(dir, "prefixed.db");
    const db = await openDatabase(`sqlite:${file}`);
    expect(db.target).toBe(file);
    await db.close();
    expect(existsSync(file)).toBe(true);
  });

  it("reports a file that is not a database as DB_UNREACHABLE naming it", async () => {
    const file = join(dir, "garbage.db");
    writeFileSync(
      file,
      "this is not a SQLite database, just some text long enough to matter".repeat(20),
    );
    const err = await failureOf(openDatabase(file));
    expect(isReposyncError(err, "DB_UNREACHABLE")).toBe(true);
    expect(err.message).toContain(file);
  });

  it("reports a path below a regular file as DB_UNREACHABLE", async () => {
    const file = join(dir, "plain");
    writeFileSync(file, "x");
    const err = await failureOf(openDatabase(join(file, "x.db")));
    expect(isReposyncError(err, "DB_UNREACHABLE")).toBe(true);
  });

  it("reports a directory in place of the file as DB_UNREACHABLE", async () => {
    const err = await failureOf(openDatabase(dir));
    expect(isReposyncError(err, "DB_UNREACHABLE")).toBe(true);
  });
});

describe.skipIf(!PG)("opening a Postgres database", () => {
  it("reports a server that does not answer as DB_UNREACHABLE, without the password", async () => {
    const err = await failureOf(openDatabase("postgres://postgres:s3cret@127.0.0.1:1/test"));
    expect(isReposyncError(err, "DB_UNREACHABLE")).toBe(true);
    expect(err.message).toContain("postgres://postgres:***@127.0.0.1:1/test");
    expect(err.message).not.toContain("s3cret");
  });

  it("reports a database that does not exist as DB_UNREACHABLE", async () => {
    const url = new URL(POSTGRES_URL);
    url.pathname = "/no_such_database_here";
    const err = await failureOf(openDatabase(url.toString()));
    expect(isReposyncError(err, "DB_UNREACHABLE")).toBe(true);
    expect(err.message).toContain("no_such_database_here");
  });

  it("refuses a schema name that is not a plain identifier", async () => {
    const err = await failureOf(openDatabase(`${POSTGRES_URL}?schema=a;drop`));
    expect(isReposyncError(err, "CONFIG_INVALID")).toBe(true);
  });
});
