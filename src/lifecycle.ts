/**
 * A start and a stop that each run once, whoever calls them and how often: stop() called
 * while the start is still running waits for it, then stops what it brought up (a SIGTERM in
 * the first second of a server must not leave half of it running).
 */
export class Lifecycle<T> {
  private starting: Promise<T> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly up: () => Promise<T>,
    /** Runs after the start settled, whether it succeeded or not. */
    private readonly down: () => Promise<void>,
  ) {}

  start(): Promise<T> {
    this.starting ??= this.up();
    return this.starting;
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await this.starting?.catch(() => {});
      await this.down();
    })();
    return this.stopping;
  }
}
