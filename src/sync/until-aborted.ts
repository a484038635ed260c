import { ReposyncError } from "../errors.js";

const STOPPED = "stopped while waiting for GitHub";

/**
 * Settles with `work`, or rejects with ABORTED as soon as `signal` aborts, whichever comes first.
 *
 * Why: @octokit/plugin-throttling waits out a secondary rate limit (retry-after, up to
 * maxRateLimitWaitMs: minutes) inside Bottleneck, which knows nothing of the request's signal.
 * A shutdown must end a job within seconds, so the job stops waiting for such a call; the call
 * itself finishes in the background (its retry goes out with the aborted signal and fails at
 * once) and its outcome is ignored.
 */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.reject(new ReposyncError("ABORTED", STOPPED));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      work.catch(() => undefined);
      reject(new ReposyncError("ABORTED", STOPPED, { cause: signal.reason }));
    };
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}
