/**
 * The database port: the little that the query modules need from a database, implemented once
 * for SQLite (the embedded default) and once for Postgres (shared by replicas). SQL text is
 * written with Postgres-style `$1` placeholders; the SQLite adapter rewrites them.
 */

/** Which SQL dialect a connection speaks; query modules branch on it where the two differ. */
export type Dialect = "sqlite" | "postgres";

/**
 * A value bound to a placeholder. Times are epoch milliseconds (numbers) in both dialects;
 * booleans become 0/1 on SQLite; byte arrays become bytea/blob.
 */
export type SqlValue = string | number | boolean | null | Uint8Array;

/** A statement: lower-case SQL with `$n` placeholders and the values bound to them. */
export interface Statement {
  readonly text: string;
  readonly values: readonly SqlValue[];
}

/** A row as the driver returns it; query modules turn rows into typed records. */
export type Row = Record<string, unknown>;

/** Something statements run on: the database itself, or an open transaction. */
export interface Queryable {
  readonly dialect: Dialect;
  /** Runs a statement and returns its rows (empty for statements without RETURNING). */
  query<T extends Row = Row>(statement: Statement): Promise<T[]>;
  /** Runs a statement and returns how many rows it changed. */
  exec(statement: Statement): Promise<number>;
  /** Runs a script of several statements without parameters (migrations only). */
  runScript(sql: string): Promise<void>;
}

/** An open database: statements, transactions, and a clean close. */
export interface Database extends Queryable {
  /** Where it points, safe to print: a file path, or a URL without its password. */
  readonly target: string;
  /** The Postgres schema selected with `?schema=` in the URL, if any. */
  readonly schema?: string;
  /**
   * Runs `fn` in one transaction: committed when it resolves, rolled back when it throws.
   * On SQLite the transaction starts with BEGIN IMMEDIATE (see the adapter for why). Inside
   * `fn`, run statements on `tx` only: on SQLite a statement on the database itself would wait
   * for this very transaction, so it is refused with DB_ERROR instead.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Closes every connection; idempotent. */
  close(): Promise<void>;
}

/** Builds a Statement; a helper so query modules read as `sql(text, a, b)`. */
export function sql(text: string, ...values: SqlValue[]): Statement {
  return { text, values };
}

/**
 * The database clock as epoch milliseconds, as an SQL expression. Lease expiry is always judged
 * by the database, never by a replica's own clock, so replicas with skewed clocks still agree.
 * Both expressions are stable within one statement (Postgres now() is the transaction start;
 * SQLite evaluates 'now' once per statement step), so a SET and a WHERE in one statement see
 * the same instant.
 */
export function nowMs(dialect: Dialect): string {
  return dialect === "postgres"
    ? "(floor(extract(epoch from now()) * 1000)::bigint)"
    : "(cast(unixepoch('subsec') * 1000 as integer))";
}
