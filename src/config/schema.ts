import {
  duration,
  httpUrl,
  integerIn,
  type ListenAddress,
  listenAddress,
  nonEmpty,
  positiveNumber,
  stateDirectory,
  workerCount,
} from "./parsers.js";

/**
 * One setting: where it comes from, how it is read, what `--help` says about it.
 * `flag` is absent for secrets on purpose: a token on a command line is visible to every user of
 * the machine through `ps`, so tokens come from the environment only.
 */
export interface Setting<T> {
  /** Environment variable that sets it, if any. */
  readonly env?: string;
  /** Command-line flag (commander syntax, e.g. `--github-sync-rate <n>`), if any. */
  readonly flag?: string;
  /** One line for `--help`. */
  readonly help: string;
  /** The default as text (parsed like any other value); undefined means "not set". */
  readonly default?: string;
  /** Reads the raw text; throws an Error saying what was expected. */
  readonly parse: (raw: string) => T;
}

/** pino's levels, plus `silent`. */
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

function setting<T>(s: Setting<T>): Setting<T> {
  return s;
}

/**
 * Every setting reposync reads. Flags win over the environment, the environment over defaults.
 * The commands pick the flags they offer from here, so names and help text live in one place.
 */
export const SETTINGS = {
  /** Where reposync keeps its state (the default SQLite file, the package cache). */
  dataDir: setting({
    env: "STATE_DIRECTORY",
    flag: "--data-dir <dir>",
    help: "directory for the SQLite database and cached packages",
    default: "./.reposync",
    parse: stateDirectory,
  }),
  /** `postgres://…` for a shared database, or a SQLite file path; default `<data-dir>/reposync.db`. */
  database: setting({
    env: "REPOSYNC_DATABASE",
    flag: "--database <url>",
    help: "postgres://user@host/db, or a SQLite file path (default: reposync.db in --data-dir)",
    parse: nonEmpty,
  }),
  /** Address the HTTP server binds. */
  listen: setting<ListenAddress>({
    env: "REPOSYNC_LISTEN",
    flag: "--listen <host:port>",
    help: "address the HTTP server listens on",
    default: "127.0.0.1:8080",
    parse: listenAddress,
  }),
  /** Bearer token for the admin API; the API is off without it. */
  adminToken: setting({
    env: "REPOSYNC_ADMIN_TOKEN",
    help: "bearer token that enables the admin API under /api/ (off when unset)",
    parse: nonEmpty,
  }),
  /** Default GitHub token for remotes without their own --token-env. */
  githubToken: setting({
    env: "GITHUB_TOKEN",
    help: "GitHub token used by remotes that name no --token-env of their own",
    parse: nonEmpty,
  }),
  /** Default GitHub API base URL (GitHub Enterprise: https://HOST/api/v3). */
  githubApiUrl: setting({
    env: "GITHUB_API_URL",
    flag: "--github-api-url <url>",
    help: "GitHub API base URL for remotes without their own --api-url",
    default: "https://api.github.com",
    parse: httpUrl,
  }),
  /** Requests per second to GitHub, API and downloads together, for the whole process. */
  githubSyncRate: setting({
    env: "GITHUB_SYNC_RATE",
    flag: "--github-sync-rate <n>",
    help: "GitHub requests per second, for the whole process",
    default: "1",
    parse: positiveNumber,
  }),
  /** How many requests may go at once after a quiet spell. */
  githubSyncBurst: setting({
    env: "GITHUB_SYNC_BURST",
    flag: "--github-sync-burst <n>",
    help: "GitHub requests allowed in a burst above the rate",
    default: "5",
    parse: integerIn(1, 1000),
  }),
  /** How many remotes sync at once in this process. */
  githubSyncWorkers: setting({
    env: "GITHUB_SYNC_WORKERS",
    flag: "--github-sync-workers <n>",
    help: "remotes synced at the same time by this process",
    default: "3",
    parse: integerIn(1, 64),
  }),
  /** How often the scheduler looks for remotes whose interval has passed (milliseconds). */
  githubSyncPollInterval: setting({
    env: "GITHUB_SYNC_POLL_INTERVAL",
    flag: "--github-sync-poll-interval <duration>",
    help: "how often to look for remotes that are due (e.g. 60s)",
    default: "60s",
    parse: duration,
  }),
  /** How long a request for a remote without repodata waits for its first sync (milliseconds). */
  coldWait: setting({
    env: "REPOSYNC_COLD_WAIT",
    flag: "--cold-wait <duration>",
    help: "how long a request for a not yet synced remote waits before a 503 (e.g. 10s)",
    default: "10s",
    parse: duration,
  }),
  /**
   * Whether replicas sharing Postgres take fetch leases on package misses (on). Off, each replica
   * downloads its own misses, as with no coordination at all: for testing and diagnosis (the
   * replica tests show with it that the leases are what keeps downloads to one per package), never
   * for production. SQLite never uses fetch leases either way.
   */
  fetchLeases: setting({
    env: "REPOSYNC_FETCH_LEASES",
    help: "on or off: fetch leases on Postgres (off is for testing and diagnosis only)",
    default: "on",
    parse: (raw: string): boolean => {
      const value = raw.trim().toLowerCase();
      if (value === "on") return true;
      if (value === "off") return false;
      throw new Error("expected on or off");
    },
  }),
  /**
   * How long a sync lease lasts unless renewed (2m); its holder renews it every quarter of this.
   * It bounds how long a remote waits after the replica scanning it died. Shorter is for tests of
   * that takeover and for diagnosis: a scan whose renewals stall for this long is taken over and
   * done twice.
   */
  syncLease: setting({
    env: "REPOSYNC_SYNC_LEASE",
    help: "how long a sync lease lasts unless renewed, e.g. 2m (shorter is for testing and diagnosis)",
    default: "2m",
    parse: (raw: string): number => {
      const ms = duration(raw);
      if (ms < 1000) throw new Error("expected at least 1s");
      return ms;
    },
  }),
  /**
   * How many processes answer HTTP (1). With more, a primary process keeps the one engine
   * (syncer, package cache, token bucket) and forks that many workers sharing the port.
   */
  workers: setting({
    env: "REPOSYNC_WORKERS",
    flag: "--workers <n|auto>",
    help: "processes answering HTTP: a number from 1 to 64, or auto (one per CPU)",
    default: "1",
    parse: workerCount,
  }),
  /** How much `serve` logs (pino levels); `warn` leaves out the line per request. */
  logLevel: setting({
    env: "REPOSYNC_LOG_LEVEL",
    flag: "--log-level <level>",
    help: `how much serve logs: ${LOG_LEVELS.join(", ")}`,
    default: "info",
    parse: (raw: string): LogLevel => {
      const level = raw.trim().toLowerCase();
      if (!(LOG_LEVELS as readonly string[]).includes(level)) {
        throw new Error(`expected one of ${LOG_LEVELS.join(", ")}`);
      }
      return level as LogLevel;
    },
  }),
} as const;

/** The name of a setting. */
export type SettingKey = keyof typeof SETTINGS;

type ValueOf<S> = S extends Setting<infer T> ? T : never;
type Defaulted<S> = S extends { readonly default: string } ? true : false;

/** The loaded configuration: every setting with a default is present, the others may be absent. */
export type Config = {
  readonly [K in SettingKey as Defaulted<(typeof SETTINGS)[K]> extends true ? K : never]: ValueOf<
    (typeof SETTINGS)[K]
  >;
} & {
  readonly [K in SettingKey as Defaulted<(typeof SETTINGS)[K]> extends true ? never : K]?: ValueOf<
    (typeof SETTINGS)[K]
  >;
} & {
  /** Always resolved: an explicit --database/REPOSYNC_DATABASE or `<dataDir>/reposync.db`. */
  readonly database: string;
};
