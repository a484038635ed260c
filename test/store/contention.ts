import { Worker } from "node:worker_threads";
import pg from "pg";
import type { Statement } from "../../src/store/port.js";
import { bindable, rewrite } from "../../src/store/sqlite-adapter.js";
import { POSTGRES_URL } from "../support/postgres.js";

/**
 * Postgres contention with an explicit signal instead of a sleep: a blocker transaction runs
 * `setup` (which locks the row the contenders will fight over) and stays open; the contenders
 * start; once Postgres reports `waiters` backends blocked by the blocker, it commits or rolls
 * back, and they all proceed at the same instant.
 */
export async function raceBehindBlocker<T>(options: {
  schemaUrl: string;
  setup: Statement;
  finish: "commit" | "rollback";
  /** How many backends must be waiting before the blocker lets go; default: every contender. */
  waiters?: number;
  start: () => Promise<T>[];
}): Promise<T[]> {
  const schema = new URL(options.schemaUrl).searchParams.get("schema");
  const blocker = new pg.Client({
    connectionString: POSTGRES_URL,
    options: `-c search_path=${schema}`,
  });
  const watcher = new pg.Client({ connectionString: POSTGRES_URL });
  await blocker.connect();
  await watcher.connect();
  try {
    await blocker.query("begin");
    await blocker.query(options.setup.text, [...options.setup.values]);
    const pid = (await blocker.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]
      ?.pid;
    const pending = options.start();
    // Keep a rejection from being reported before Promise.all below collects it.
    for (const p of pending) p.catch(() => undefined);
    const waiters = options.waiters ?? pending.length;
    const deadline = Date.now() + 30_000;
    for (;;) {
      const r = await watcher.query<{ n: number }>(
        "select count(*)::int as n from pg_stat_activity where $1 = any(pg_blocking_pids(pid))",
        [pid],
      );
      if ((r.rows[0]?.n ?? 0) >= waiters) break;
      if (Date.now() > deadline) {
        throw new Error(`only ${r.rows[0]?.n} of ${waiters} contenders reached the lock`);
      }
      // Poll the condition itself (not a guess at how long it takes), gently on a 2-core box.
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await blocker.query(options.finish);
    return await Promise.all(pending);
  } finally {
    await blocker.end().catch(() => undefined);
    await watcher.end().catch(() => undefined);
  }
}

// Runs in each worker thread: its own connection, then wait at the barrier, then one statement.
const WORKER = `
const { workerData, parentPort } = require("node:worker_threads");
const Database = require("better-sqlite3");
const db = new Database(workerData.file);
db.pragma("busy_timeout = 30000");
const stmt = db.prepare(workerData.text);
const gate = new Int32Array(workerData.gate);
parentPort.postMessage("ready");
Atomics.wait(gate, 0, 0);
const out = stmt.reader ? stmt.all(...workerData.args).length : stmt.run(...workerData.args).changes;
db.close();
parentPort.postMessage(out);
`;

/**
 * SQLite contention for real: one worker thread per statement, each with its own connection to
 * `file`, released together from a shared-memory barrier once all have prepared. Resolves to the
 * number of rows each statement returned (or changed), in order.
 */
export async function raceOnSqlite(file: string, statements: Statement[]): Promise<number[]> {
  const gate = new SharedArrayBuffer(4);
  const ready: Promise<void>[] = [];
  const done: Promise<number>[] = [];
  const workers = statements.map((s) => {
    const { text, order } = rewrite(s.text);
    const args = order.map((i) => bindable(s.values[i]));
    const w = new Worker(WORKER, { eval: true, workerData: { file, text, args, gate } });
    let onReady!: () => void;
    ready.push(
      new Promise<void>((r) => {
        onReady = r;
      }),
    );
    done.push(
      new Promise<number>((resolve, reject) => {
        w.on("message", (m: unknown) => (m === "ready" ? onReady() : resolve(m as number)));
        w.on("error", reject);
      }),
    );
    return w;
  });
  try {
    await Promise.all(ready);
    const flag = new Int32Array(gate);
    Atomics.store(flag, 0, 1);
    Atomics.notify(flag, 0);
    return await Promise.all(done);
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}
