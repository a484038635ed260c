import { describe, expect, it } from "vitest";
import { isPostgresUrl } from "../../src/store/open-database.js";
import { redactUrl } from "../../src/store/redact.js";

describe("redactUrl", () => {
  it.each([
    [
      "postgres://me:s3cret@db.example.test:5432/rs?schema=x",
      "postgres://me:***@db.example.test:5432/rs?schema=x",
    ],
    ["postgresql://me@db/rs", "postgresql://me@db/rs"],
    ["postgres://me:p%40ss@db/rs", "postgres://me:***@db/rs"],
    ["/var/lib/reposync/reposync.db", "/var/lib/reposync/reposync.db"],
    ["postgres://me:pw@[bad", "postgres://me:***@[bad"],
  ])("shows %j as %j", (url, shown) => {
    expect(redactUrl(url)).toBe(shown);
  });
});

describe("isPostgresUrl", () => {
  it.each([
    ["postgres://h/db", true],
    ["postgresql://h/db", true],
    ["POSTGRES://h/db", true],
    ["./reposync.db", false],
    ["sqlite:/tmp/x.db", false],
    ["/srv/postgres://odd.db", false],
  ])("%j is Postgres: %s", (url, yes) => {
    expect(isPostgresUrl(url)).toBe(yes);
  });
});
