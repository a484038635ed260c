/**
 * Settles with `work`, or rejects with `reason(signal)` as soon as `signal` aborts (at once when
 * it already has), whichever comes first. `work` itself goes on; its later outcome is ignored.
 *
 * Two places need this: a sync job stops waiting for an octokit call that
 * @octokit/plugin-throttling holds inside Bottleneck, which knows nothing of the request's signal
 * (a shutdown must end a job within seconds, not after a secondary rate limit's retry-after);
 * and a caller of a coalesced package fetch leaves when its own client does, while the shared
 * fetch runs on for the others.
 */
export function untilAborted<T>(
  work: Promise<T>,
  signal: AbortSignal | undefined,
  reason: (signal: AbortSignal) => unknown = defaultReason,
): Promise<T> {
  if (!signal) return work;
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.reject(reason(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      work.catch(() => undefined);
      reject(reason(signal));
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

/** The signal's own reason, else a standard AbortError. */
function defaultReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("The operation was aborted", "AbortError");
}
