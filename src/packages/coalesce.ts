import { ReposyncError } from "../errors.js";
import { type Clock, systemClock } from "../github/clock.js";
import { untilAborted } from "../until-aborted.js";
import { normaliseSha256 } from "./content-store.js";

/** What makes two requests the same package: its digest and its size. */
export interface PackageIdentity {
  readonly sha256: string;
  readonly size: number;
}

/**
 * The coalescing key of a package: lower-case sha256 and size. Callers expecting different bytes
 * never share a fetch, and one digest written in two casings is still one key (a key taken
 * verbatim would let `AB…` and `ab…` each run their own download of the same file).
 */
export function packageKey(identity: PackageIdentity): string {
  return `${normaliseSha256(identity.sha256)}:${identity.size}`;
}

/** What the leader of one key does, given to {@link Coalescer.run} by each caller. */
export interface LeaderWork<T> {
  /** Looks in the store; undefined on a miss. */
  recheck(): Promise<T | undefined>;
  /** Downloads and stores; honours `signal` (the fetch's own, never a client's). */
  fetch(signal: AbortSignal): Promise<T>;
}

/** What an {@link Acquire} step gets: the key, the work, and the fetch's own signal. */
export interface AcquireContext<T> extends LeaderWork<T> {
  readonly key: string;
  readonly signal: AbortSignal;
}

/**
 * The step between the leader's recheck and its fetch, pluggable so that the Postgres fetch
 * lease wraps it without the coalescer knowing about databases:
 *
 *     leader: recheck -> acquire( [take lease] -> fetch -> store -> [release lease] )
 *
 * A lease-taking acquire that finds another replica holding the lease polls `recheck` instead
 * of calling `fetch`, and calls `fetch` itself when that lease fails or expires. It must wait
 * under `signal` (the fetch's own, detached and bounded by the fetch timeout), never under a
 * client's: the caller that happened to lead may leave while others in this process still wait
 * on the same flight. Whatever it resolves to, or throws, reaches every waiter of the key.
 */
export type Acquire<T> = (context: AcquireContext<T>) => Promise<T>;

/** The acquire step of a single process (and of SQLite): fetch at once. */
export function fetchDirectly<T>(context: AcquireContext<T>): Promise<T> {
  return context.fetch(context.signal);
}

export interface CoalescerOptions<T> {
  /** Bounds each shared fetch, whoever waits for it (milliseconds). */
  readonly fetchTimeoutMs: number;
  readonly acquire?: Acquire<T>;
  readonly clock?: Clock;
  /** A caller joined a fetch already in flight. */
  readonly onCoalescedWait?: () => void;
  /** A shared fetch failed (it reaches its waiters too; this is for the log, as some may have left). */
  readonly onFetchError?: (key: string, error: unknown) => void;
}

/** Which part a caller played. */
export type CoalesceRole = "leader" | "waiter";

interface Flight<T> {
  readonly promise: Promise<T>;
  readonly abort: AbortController;
}

/**
 * Shares one fetch among the concurrent misses of one key in this process.
 *
 * The fetch runs detached from every caller: it is driven by its own AbortController and
 * timeout, not by the signal of the request that happened to start it. A dnf client gives up
 * after its own timeout, but the bytes it asked for are what the next client needs too;
 * finishing the download (bounded by fetchTimeoutMs) turns that lost request into a cache hit
 * for everyone after it. Each caller, the first included, only races the shared promise against
 * its own signal, so any of them can leave without touching the others.
 *
 * A failure of any kind (a rejection, a synchronous throw in recheck/acquire/fetch, a non-Error
 * thrown value) settles the shared promise, so it reaches every caller still waiting, and the
 * key is freed before they see it: the next request for the package starts a fresh attempt
 * instead of inheriting the failure.
 */
export class Coalescer<T> {
  private readonly flights = new Map<string, Flight<T>>();
  /** Leader work still running, including work whose waiters were released by an abort. */
  private readonly working = new Set<Promise<unknown>>();
  private readonly acquire: Acquire<T>;
  private readonly clock: Clock;

  constructor(private readonly options: CoalescerOptions<T>) {
    this.acquire = options.acquire ?? fetchDirectly;
    this.clock = options.clock ?? systemClock;
  }

  /** Keys with a fetch in flight. */
  get inFlight(): number {
    return this.flights.size;
  }

  /**
   * The shared result for `key`: joins the fetch in flight, or leads a new one with `work`.
   * Rejects with `signal`'s reason (an AbortError) as soon as `signal` aborts; the fetch goes on.
   */
  async run(
    key: string,
    work: LeaderWork<T>,
    signal?: AbortSignal,
  ): Promise<{ value: T; role: CoalesceRole }> {
    signal?.throwIfAborted();
    // Roles are decided here without an await between the lookup and the insert. JavaScript
    // runs this function to its first await without interruption, so no other caller can see
    // the map between `get` and `set`: exactly one caller per key becomes the leader, with no
    // mutex. An await between them would reopen the window where two callers both lead.
    let flight = this.flights.get(key);
    let role: CoalesceRole = "waiter";
    if (flight) {
      this.options.onCoalescedWait?.();
    } else {
      flight = this.lead(key, work);
      role = "leader";
    }
    return { value: await untilAborted(flight.promise, signal), role };
  }

  /** Aborts every fetch in flight (their waiters get the abort as an ABORTED error). */
  abortAll(reason: string): void {
    for (const flight of this.flights.values()) {
      flight.abort.abort(new ReposyncError("ABORTED", reason));
    }
  }

  /**
   * Resolves once every fetch in flight now has settled, however it ended, and the work behind
   * it has returned (an aborted download has removed its temporary file).
   */
  async settled(): Promise<void> {
    await Promise.allSettled([
      ...[...this.flights.values()].map((f) => f.promise),
      ...this.working,
    ]);
  }

  private lead(key: string, work: LeaderWork<T>): Flight<T> {
    const abort = new AbortController();
    let settle!: { resolve: (value: T) => void; reject: (err: unknown) => void };
    const promise = new Promise<T>((resolve, reject) => {
      settle = { resolve, reject };
    });
    // Every caller may leave: the outcome must never become an unhandled rejection.
    promise.catch(() => {});
    const flight: Flight<T> = { promise, abort };
    // In the map before the leader's body runs, so that even a synchronous throw in it finds
    // the entry to free.
    this.flights.set(key, flight);
    this.leaderBody(key, work, abort).then(
      (value) => {
        this.free(key, flight);
        settle.resolve(value);
      },
      (err: unknown) => {
        // Freed before any waiter sees the outcome, so a retry after a failure starts afresh.
        this.free(key, flight);
        settle.reject(err);
      },
    );
    return flight;
  }

  private free(key: string, flight: Flight<T>): void {
    if (this.flights.get(key) === flight) this.flights.delete(key);
  }

  /** recheck -> acquire (-> fetch), under the fetch's own abort and timeout. */
  private async leaderBody(key: string, work: LeaderWork<T>, abort: AbortController): Promise<T> {
    const timeoutMs = this.options.fetchTimeoutMs;
    const timeout = new AbortController();
    const timer = new AbortController();
    this.clock.sleep(timeoutMs, timer.signal).then(
      () =>
        timeout.abort(new ReposyncError("TIMEOUT", `package fetch ${key}: over ${timeoutMs} ms`)),
      () => {},
    );
    const signal = AbortSignal.any([abort.signal, timeout.signal]);
    try {
      // Raced against its own signal too, so that a step ignoring the signal still cannot hold
      // the key and its waiters past the timeout.
      const running = this.recheckThenAcquire(key, work, signal);
      this.working.add(running);
      running.then(
        () => this.working.delete(running),
        () => this.working.delete(running),
      );
      return await untilAborted(running, signal);
    } catch (err) {
      const error = asError(err, signal);
      try {
        this.options.onFetchError?.(key, error);
      } catch {
        // A failing log or metrics hook must not replace the error the waiters are owed.
      }
      throw error;
    } finally {
      timer.abort();
    }
  }

  private async recheckThenAcquire(
    key: string,
    work: LeaderWork<T>,
    signal: AbortSignal,
  ): Promise<T> {
    // The recheck is the leader's alone. A caller's own miss check ran before it got here,
    // and a fetch that committed in between (whose flight has just left the map) would
    // otherwise be repeated. Waiters need none: they wait for a fetch in flight.
    const stored = await work.recheck();
    if (stored !== undefined) return stored;
    signal.throwIfAborted();
    return await this.acquire({
      key,
      signal,
      recheck: () => work.recheck(),
      fetch: (s) => work.fetch(s),
    });
  }
}

/** The fetch's failure as an Error: its own abort reason when it was aborted or timed out. */
function asError(err: unknown, signal: AbortSignal): Error {
  if (signal.aborted && signal.reason instanceof ReposyncError) return signal.reason;
  if (err instanceof Error) return err;
  return new Error(`package fetch failed with a non-Error value: ${String(err)}`, { cause: err });
}
