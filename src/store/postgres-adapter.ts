import pg from "pg";
import { ReposyncError } from "../errors.js";
import type { Database, Queryable, Row, SqlValue, Statement } from "./port.js";
import { redactUrl } from "./redact.js";

/**
 * Pool limits. Ten connections cover a process's syncer workers, its lease queries and its HTTP
 * lookups with room to spare, while ten replicas still fit in Postgres' default 100 connections.
 * A connection attempt that hangs for 5 s means the database is unreachable, not slow.
 */
const POOL = {
  max: 10,
  idleTimeoutMillis: 30_000,
  connectionTimeoutMillis: 5_000,
  // A statement running a minute is a bug or a lock pile-up; fail it rather than hang a worker.
  statement_timeout: 60_000,
  application_name: "reposync",
} as const;

const INT8_OID = 20;

// Epoch-millisecond columns are bigint; their values stay far below 2^53, so a JS number is exact.
const types = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8_OID && format !== "binary"
      ? (v: string) => Number(v)
      : pg.types.getTypeParser(oid, format ?? "text")) as typeof pg.types.getTypeParser,
};

// Connection failures: sockets, SQLSTATE classes 08 (connection) and 28 (authorization),
// 3D000 (no such database), 57P0x (server shutting down), and the pool's own connect timeout.
function isUnreachable(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string") {
    if (/^(E[A-Z]+)$/.test(code)) return true; // ECONNREFUSED, ENOTFOUND, ETIMEDOUT, …
    if (/^(08|28)/.test(code) || code === "3D000" || /^57P0/.test(code)) return true;
  }
  const msg = err instanceof Error ? err.message : "";
  return /timeout exceeded when trying to connect|Connection terminated/i.test(msg);
}

function mapError(err: unknown, target: string): ReposyncError {
  if (err instanceof ReposyncError) return err;
  const msg = err instanceof Error ? err.message : String(err);
  if (isUnreachable(err)) {
    return new ReposyncError("DB_UNREACHABLE", `cannot reach database ${target}: ${msg}`, {
      cause: err,
    });
  }
  return new ReposyncError("DB_ERROR", `database error (${target}): ${msg}`, { cause: err });
}

function bindable(v: SqlValue): unknown {
  return v instanceof Uint8Array && !Buffer.isBuffer(v)
    ? Buffer.from(v.buffer, v.byteOffset, v.byteLength)
    : v;
}

function on(client: pg.Pool | pg.PoolClient, target: string): Queryable {
  return {
    dialect: "postgres",
    async query<T extends Row>(s: Statement): Promise<T[]> {
      try {
        return (await client.query<T>(s.text, s.values.map(bindable))).rows;
      } catch (err) {
        throw mapError(err, target);
      }
    },
    async exec(s: Statement): Promise<number> {
      try {
        return (await client.query(s.text, s.values.map(bindable))).rowCount ?? 0;
      } catch (err) {
        throw mapError(err, target);
      }
    },
    async runScript(text: string): Promise<void> {
      try {
        // Without values pg uses the simple protocol, which accepts several statements.
        await client.query(text);
      } catch (err) {
        throw mapError(err, target);
      }
    },
  };
}

/** Postgres through a `pg` pool; see POOL for the limits. */
class PostgresDatabase implements Database {
  readonly dialect = "postgres" as const;
  readonly target: string;
  readonly schema: string | undefined;
  readonly #pool: pg.Pool;
  readonly #direct: Queryable;
  #closed: Promise<void> | undefined;

  constructor(pool: pg.Pool, target: string, schema: string | undefined) {
    this.#pool = pool;
    this.target = target;
    this.schema = schema;
    this.#direct = on(pool, target);
  }

  query<T extends Row = Row>(statement: Statement): Promise<T[]> {
    return this.#direct.query<T>(statement);
  }
  exec(statement: Statement): Promise<number> {
    return this.#direct.exec(statement);
  }
  runScript(text: string): Promise<void> {
    return this.#direct.runScript(text);
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (err) {
      throw mapError(err, this.target);
    }
    let broken = false;
    try {
      await client.query("begin");
      const out = await fn(on(client, this.target));
      await client.query("commit");
      return out;
    } catch (err) {
      try {
        await client.query("rollback");
      } catch {
        broken = true; // the connection is gone; do not hand it to the next caller
      }
      throw mapError(err, this.target);
    } finally {
      client.release(broken);
    }
  }

  close(): Promise<void> {
    this.#closed ??= this.#pool.end();
    return this.#closed;
  }
}

/** Unquoted Postgres identifiers we accept for `?schema=`; anything else is a typo or worse. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * Opens a pool on a `postgres://` URL and checks that the database answers, so an unreachable
 * database is reported at once as DB_UNREACHABLE naming the URL (without its password).
 * `?schema=NAME` in the URL sets the search_path, which gives each test its own schema.
 */
export async function openPostgres(url: string): Promise<Database> {
  const target = redactUrl(url);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (err) {
    throw new ReposyncError("CONFIG_INVALID", `database URL ${target} is not a valid URL`, {
      cause: err,
    });
  }
  const schema = parsed.searchParams.get("schema") ?? undefined;
  parsed.searchParams.delete("schema");
  if (schema !== undefined && !SCHEMA_NAME.test(schema)) {
    throw new ReposyncError(
      "CONFIG_INVALID",
      `database URL ${target}: schema "${schema}" must be a lower-case identifier`,
    );
  }
  const pool = new pg.Pool({
    ...POOL,
    connectionString: parsed.toString(),
    types,
    ...(schema === undefined ? {} : { options: `-c search_path=${schema}` }),
  });
  // An idle client that loses its connection emits 'error' on the pool; without a listener that
  // would crash the process. The next query gets a fresh connection and reports any real outage.
  pool.on("error", () => undefined);
  const db = new PostgresDatabase(pool, target, schema);
  try {
    await db.query({ text: "select 1", values: [] });
  } catch (err) {
    await db.close().catch(() => undefined);
    throw err;
  }
  return db;
}
