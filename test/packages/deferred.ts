/** A promise the test settles by hand: the explicit signal concurrency tests wait on. */
export interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(err: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A counter that resolves `reached(n)` once it has been bumped n times. */
export class Countdown {
  count = 0;
  private waiters: { n: number; done: () => void }[] = [];

  bump = (): void => {
    this.count++;
    for (const w of this.waiters.filter((x) => x.n <= this.count)) w.done();
    this.waiters = this.waiters.filter((x) => x.n > this.count);
  };

  reached(n: number): Promise<void> {
    if (this.count >= n) return Promise.resolve();
    return new Promise((done) => this.waiters.push({ n, done }));
  }
}
