import { ReposyncError } from "../errors.js";
import { nowMs, type Queryable, sql } from "./port.js";
import { type NewRemote, type PackageMode, type Remote, validateRemote } from "./remote-input.js";

interface RemoteRow {
  [key: string]: unknown;
  name: string;
  repo: string;
  api_url: string | null;
  token_env: string | null;
  include_globs: string;
  exclude_globs: string;
  prereleases: boolean | number;
  interval_ms: number;
  package_mode: string;
  created_at: number;
}

const COLUMNS =
  "name, repo, api_url, token_env, include_globs, exclude_globs, prereleases, interval_ms, package_mode, created_at";

function toRemote(r: RemoteRow): Remote {
  return {
    name: r.name,
    repo: r.repo,
    apiUrl: r.api_url,
    tokenEnv: r.token_env,
    include: JSON.parse(r.include_globs) as string[],
    exclude: JSON.parse(r.exclude_globs) as string[],
    // SQLite has no boolean type and hands back 0/1.
    prereleases: Boolean(r.prereleases),
    intervalMs: Number(r.interval_ms),
    packageMode: r.package_mode as PackageMode,
    createdAt: Number(r.created_at),
  };
}

/**
 * Stores a new remote after validating it. A name already taken is CONFLICT, detected by
 * `on conflict do nothing` rather than by parsing two drivers' unique-violation errors.
 */
export async function addRemote(db: Queryable, input: NewRemote): Promise<Remote> {
  const r = validateRemote(input);
  const rows = await db.query<RemoteRow>(
    sql(
      `insert into remotes (${COLUMNS})
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, ${nowMs(db.dialect)})
       on conflict (name) do nothing
       returning ${COLUMNS}`,
      r.name,
      r.repo,
      r.apiUrl,
      r.tokenEnv,
      JSON.stringify(r.include),
      JSON.stringify(r.exclude),
      r.prereleases,
      r.intervalMs,
      r.packageMode,
    ),
  );
  const row = rows[0];
  if (row === undefined) {
    throw new ReposyncError("CONFLICT", `remote "${r.name}" already exists`);
  }
  return toRemote(row);
}

/** The remote called `name`, or undefined. */
export async function findRemote(db: Queryable, name: string): Promise<Remote | undefined> {
  const rows = await db.query<RemoteRow>(
    sql(`select ${COLUMNS} from remotes where name = $1`, name),
  );
  return rows[0] === undefined ? undefined : toRemote(rows[0]);
}

/** The remote called `name`; NOT_FOUND when there is none. */
export async function getRemote(db: Queryable, name: string): Promise<Remote> {
  const remote = await findRemote(db, name);
  if (remote === undefined) throw new ReposyncError("NOT_FOUND", `no remote named "${name}"`);
  return remote;
}

/** Every remote, by name. */
export async function listRemotes(db: Queryable): Promise<Remote[]> {
  const rows = await db.query<RemoteRow>(sql(`select ${COLUMNS} from remotes order by name`));
  return rows.map(toRemote);
}

/**
 * Removes a remote and, through `on delete cascade`, everything it owns: sync state, assets,
 * packages, snapshots and their files, cached-file records. NOT_FOUND when there is none.
 * Cached files on disk are left to the package cache's own cleanup.
 */
export async function removeRemote(db: Queryable, name: string): Promise<void> {
  const n = await db.exec(sql("delete from remotes where name = $1", name));
  if (n === 0) throw new ReposyncError("NOT_FOUND", `no remote named "${name}"`);
}
