/** One satisfiable byte range of a file, both ends inclusive (as Content-Range states them). */
export interface ByteRange {
  readonly start: number;
  readonly end: number;
}

/**
 * Reads a `Range` header against a file of `size` bytes: a range to send, `"unsatisfiable"`
 * (answer 416), or undefined (ignore the header and send the whole file, which RFC 9110 allows
 * for anything we do not understand, multiple ranges included).
 *
 * Hand-written because the library that would do this with the rest of static-file serving
 * (@fastify/send) is not a dependency, and dnf, curl and librepo only ever ask for one range
 * (a resumed download: `bytes=N-`). Multipart answers for several ranges are left out on
 * purpose: no client of a package repository needs them, and a 200 is a correct answer.
 */
export function parseByteRange(
  header: string | undefined,
  size: number,
): ByteRange | "unsatisfiable" | undefined {
  if (header === undefined) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m) return undefined;
  const [, first = "", last = ""] = m;
  if (first === "" && last === "") return undefined;
  if (first === "") {
    // A suffix: the last N bytes.
    const n = Number(last);
    if (!Number.isSafeInteger(n)) return undefined;
    if (n === 0 || size === 0) return "unsatisfiable";
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(first);
  const end = last === "" ? size - 1 : Math.min(Number(last), size - 1);
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end)) return undefined;
  if (last !== "" && Number(last) < start) return undefined;
  if (start >= size) return "unsatisfiable";
  return { start, end };
}
