import { AsyncLocalStorage } from "node:async_hooks";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { ReposyncError } from "../errors.js";
import type { Database, Queryable, Row, SqlValue, Statement } from "./port.js";

type Driver = BetterSqlite3.Database;
type Prepared = BetterSqlite3.Statement<unknown[], unknown>;

/** How long a writer waits for another connection's write lock before SQLITE_BUSY. */
const BUSY_TIMEOUT_MS = 5_000;

// Codes that mean the file itself is the problem (missing, unreadable, not a database), as
// opposed to a bad statement. They become DB_UNREACHABLE so the CLI prints one line about the file.
const FILE_ERRORS = /^SQLITE_(CANTOPEN|NOTADB|CORRUPT|IOERR|PERM|READONLY|AUTH)/;

/** Rewrites `$n` placeholders into `?` and orders the values to match (values may repeat). */
export function rewrite(text: string): { text: string; order: number[] } {
  const order: number[] = [];
  const out = text.replace(/\$(\d+)/g, (_m, n: string) => {
    order.push(Number(n) - 1);
    return "?";
  });
  return { text: out, order };
}

/** A value as better-sqlite3 binds it: booleans as 0/1, byte arrays as Buffers. */
export function bindable(v: SqlValue | undefined): unknown {
  if (typeof v === "boolean") return v ? 1 : 0;
  if (v instanceof Uint8Array && !Buffer.isBuffer(v)) {
    return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  }
  return v ?? null;
}

function mapError(err: unknown, file: string): ReposyncError {
  if (err instanceof ReposyncError) return err;
  const code = (err as { code?: unknown }).code;
  const msg = err instanceof Error ? err.message : String(err);
  if (typeof code === "string" && FILE_ERRORS.test(code)) {
    return new ReposyncError("DB_UNREACHABLE", `cannot use SQLite database ${file}: ${msg}`, {
      cause: err,
    });
  }
  return new ReposyncError("DB_ERROR", `database error (${file}): ${msg}`, { cause: err });
}

/** How a SQLite database is opened. */
export interface SqliteOptions {
  /**
   * Refuse, with DB_ERROR, a statement issued on the database itself from inside one of its own
   * transactions (it would otherwise wait for that transaction forever). A development check:
   * see SqliteDatabase for its cost.
   */
  readonly guardNestedUse?: boolean;
}

/**
 * SQLite through better-sqlite3: one synchronous connection per Database, in WAL mode so readers
 * never wait for the writer. Because the driver is synchronous and shared, an async transaction
 * would let other callers' statements slip in between its awaits; a promise chain makes every
 * other caller wait until the transaction ends.
 */
class SqliteDatabase implements Database {
  readonly dialect = "sqlite" as const;
  readonly target: string;
  readonly #db: Driver;
  readonly #cache = new Map<string, { stmt: Prepared; order: number[] }>();
  #tail: Promise<unknown> = Promise.resolve();
  #closed = false;
  // Marks code running inside this database's transaction callback; see #queue. Only with
  // the guard on: on Node 20 a used AsyncLocalStorage turns on async hooks for the whole process,
  // which cost a serving process about a quarter of its repodata throughput (wrk, loopback).
  // The tests open databases with the guard, so a misuse fails there; production skips it.
  readonly #inTransaction: AsyncLocalStorage<SqliteDatabase> | undefined;

  constructor(db: Driver, file: string, options: SqliteOptions = {}) {
    this.#db = db;
    this.target = file;
    this.#inTransaction = options.guardNestedUse ? new AsyncLocalStorage() : undefined;
  }

  #prepare(statement: Statement): { stmt: Prepared; args: unknown[] } {
    let hit = this.#cache.get(statement.text);
    if (hit === undefined) {
      const { text, order } = rewrite(statement.text);
      hit = { stmt: this.#db.prepare(text), order };
      this.#cache.set(statement.text, hit);
    }
    return { stmt: hit.stmt, args: hit.order.map((i) => bindable(statement.values[i])) };
  }

  #run<T>(fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      throw mapError(err, this.target);
    }
  }

  // Statements issued by the transaction's own callback run directly; everyone else queues.
  readonly #direct: Queryable = {
    dialect: "sqlite",
    query: async <T extends Row>(s: Statement) =>
      this.#run(() => {
        const { stmt, args } = this.#prepare(s);
        if (stmt.reader) return stmt.all(...args) as T[];
        stmt.run(...args);
        return [];
      }),
    exec: async (s: Statement) =>
      this.#run(() => {
        const { stmt, args } = this.#prepare(s);
        return stmt.reader ? stmt.all(...args).length : stmt.run(...args).changes;
      }),
    runScript: async (text: string) => {
      this.#run(() => this.#db.exec(text));
    },
  };

  #queue<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#closed) {
      return Promise.reject(new ReposyncError("DB_ERROR", `database ${this.target} is closed`));
    }
    // A statement on the database itself from inside its own transaction would queue behind
    // that transaction and wait for it forever; fail loudly instead of hanging.
    if (this.#inTransaction?.getStore() === this) {
      return Promise.reject(
        new ReposyncError(
          "DB_ERROR",
          "a statement ran on the database inside its own transaction; use the transaction's handle",
        ),
      );
    }
    const result = this.#tail.then(fn);
    this.#tail = result.catch(() => undefined);
    return result;
  }

  query<T extends Row = Row>(statement: Statement): Promise<T[]> {
    return this.#queue(() => this.#direct.query<T>(statement));
  }

  exec(statement: Statement): Promise<number> {
    return this.#queue(() => this.#direct.exec(statement));
  }

  runScript(text: string): Promise<void> {
    return this.#queue(() => this.#direct.runScript(text));
  }

  /**
   * BEGIN IMMEDIATE takes the write lock up front. A deferred transaction that reads first and
   * writes later can fail with SQLITE_BUSY at the write no matter the busy timeout (another
   * connection wrote in between); taking the lock at BEGIN makes it wait its turn instead.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.#queue(async () => {
      this.#run(() => this.#db.exec("begin immediate"));
      try {
        const out = await (this.#inTransaction
          ? this.#inTransaction.run(this, () => fn(this.#direct))
          : fn(this.#direct));
        this.#run(() => this.#db.exec("commit"));
        return out;
      } catch (err) {
        if (this.#db.inTransaction) this.#db.exec("rollback");
        throw err;
      }
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    await this.#queue(async () => undefined);
    this.#closed = true;
    this.#db.close();
  }
}

/**
 * Opens (creating if needed) the SQLite database at `file`, with WAL, a busy timeout and foreign
 * keys on. A file that cannot be opened or is not a database is one DB_UNREACHABLE error.
 */
export function openSqlite(file: string, options: SqliteOptions = {}): Database {
  let db: Driver | undefined;
  try {
    if (file !== ":memory:") mkdirSync(dirname(file), { recursive: true });
    db = new BetterSqlite3(file);
    // journal_mode reads the file header, so a file that is not a database fails here, at open.
    db.pragma("journal_mode = WAL");
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    db.pragma("foreign_keys = ON");
    // NORMAL is durable across application crashes in WAL mode; only an OS crash can lose the
    // last transactions, which the next sync rewrites anyway.
    db.pragma("synchronous = NORMAL");
    return new SqliteDatabase(db, file, options);
  } catch (err) {
    db?.close();
    const msg = err instanceof Error ? err.message : String(err);
    throw new ReposyncError("DB_UNREACHABLE", `cannot open SQLite database ${file}: ${msg}`, {
      cause: err,
    });
  }
}
