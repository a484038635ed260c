import type { Clock } from "../../src/github/clock.js";

interface Sleeper {
  at: number;
  resolve: () => void;
}

/** Lets every pending promise callback run (one macrotask turn, no time passes). */
export const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * A clock that only moves when the test says so. `advance` wakes sleepers in deadline order,
 * letting the code they resume run before the next one wakes, as real time would.
 */
export class FakeClock implements Clock {
  private sleepers: Sleeper[] = [];
  private onSleep: (() => void)[] = [];

  constructor(private time = 1_700_000_000_000) {}

  now(): number {
    return this.time;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (ms <= 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const sleeper: Sleeper = { at: this.time + ms, resolve };
      this.sleepers.push(sleeper);
      for (const wake of this.onSleep.splice(0)) wake();
      signal?.addEventListener(
        "abort",
        () => {
          this.sleepers = this.sleepers.filter((s) => s !== sleeper);
          reject(signal.reason);
        },
        { once: true },
      );
    });
  }

  /** Resolves when some code starts sleeping (at once if some already is). */
  sleeping(): Promise<void> {
    if (this.sleepers.length > 0) return Promise.resolve();
    return new Promise((resolve) => this.onSleep.push(resolve));
  }

  /** How many sleeps are pending. */
  get pending(): number {
    return this.sleepers.length;
  }

  /** Moves time forward by `ms`, waking each sleeper whose deadline passes, in order. */
  async advance(ms: number): Promise<void> {
    const target = this.time + ms;
    await settle();
    for (;;) {
      const next = this.sleepers.filter((s) => s.at <= target).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      this.time = Math.max(this.time, next.at);
      this.sleepers = this.sleepers.filter((s) => s !== next);
      next.resolve();
      await settle();
    }
    this.time = target;
    await settle();
  }
}
