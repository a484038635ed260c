import { randomBytes } from "node:crypto";
import pg from "pg";
import { IN_CI } from "./tools.js";

/**
 * The test Postgres: 127.0.0.1:5432, trust auth, database `test`. Override with
 * REPOSYNC_TEST_POSTGRES (a URL without `?schema=`).
 */
export const POSTGRES_URL =
  process.env.REPOSYNC_TEST_POSTGRES ?? "postgres://postgres@127.0.0.1:5432/test";

let available: Promise<boolean> | undefined;

/**
 * Whether the test Postgres answers. Outside CI a suite may skip without it
 * (`describe.skipIf(!(await havePostgres()))`); with CI=true a missing Postgres throws, so the run
 * fails instead of silently skipping the Postgres half of the store tests.
 */
export function havePostgres(): Promise<boolean> {
  available ??= (async () => {
    const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3000 });
    try {
      await client.connect();
      await client.query("select 1");
      return true;
    } catch (err) {
      if (IN_CI) {
        throw new Error(`CI=true but Postgres at ${POSTGRES_URL} is not reachable: ${String(err)}`);
      }
      return false;
    } finally {
      await client.end().catch(() => undefined);
    }
  })();
  return available;
}

/** A schema of its own for one test; `url` selects it, `drop()` removes it and all it holds. */
export interface TestSchema {
  readonly name: string;
  readonly url: string;
  drop(): Promise<void>;
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * Creates an empty schema with a random name. With `create: false` only the name is reserved,
 * for tests of what reposync does on a schema that does not exist yet.
 */
export async function createTestSchema(options: { create?: boolean } = {}): Promise<TestSchema> {
  const name = `t_${randomBytes(6).toString("hex")}`;
  if (options.create !== false) await admin((c) => c.query(`create schema ${name}`));
  const url = new URL(POSTGRES_URL);
  url.searchParams.set("schema", name);
  return {
    name,
    url: url.toString(),
    drop: () =>
      admin((c) => c.query(`drop schema if exists ${name} cascade`)).then(() => undefined),
  };
}
