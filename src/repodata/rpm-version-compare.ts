/**
 * rpm's version segment comparison (rpmvercmp), as rpm 4.18 defines it. createrepo_c uses it to
 * pick the highest `libc.so.6(GLIBC_x.y)` require. Hand-written: it is a dozen lines of rpm
 * semantics (tilde sorts before everything, caret after the base but before any suffix, numeric
 * segments beat alphabetic ones) that no general semver library implements.
 *
 * @returns negative when a < b, 0 when equal, positive when a > b.
 */
export function rpmVersionCompare(a: string, b: string): number {
  if (a === b) return 0;
  let i = 0;
  let j = 0;
  const isAlnum = (c: string | undefined): boolean => c !== undefined && /[0-9A-Za-z]/.test(c);
  const isDigit = (c: string | undefined): boolean => c !== undefined && c >= "0" && c <= "9";
  const isAlpha = (c: string | undefined): boolean => c !== undefined && /[A-Za-z]/.test(c);

  while (i < a.length || j < b.length) {
    while (i < a.length && !isAlnum(a[i]) && a[i] !== "~" && a[i] !== "^") i++;
    while (j < b.length && !isAlnum(b[j]) && b[j] !== "~" && b[j] !== "^") j++;

    // A tilde sorts before anything, even the end of the string.
    if (a[i] === "~" || b[j] === "~") {
      if (a[i] !== "~") return 1;
      if (b[j] !== "~") return -1;
      i++;
      j++;
      continue;
    }
    // A caret sorts after the end of the string but before any other segment.
    if (a[i] === "^" || b[j] === "^") {
      if (i >= a.length) return -1;
      if (j >= b.length) return 1;
      if (a[i] !== "^") return 1;
      if (b[j] !== "^") return -1;
      i++;
      j++;
      continue;
    }
    if (i >= a.length || j >= b.length) break;

    const numeric = isDigit(a[i]);
    const take = numeric ? isDigit : isAlpha;
    const startA = i;
    const startB = j;
    while (i < a.length && take(a[i])) i++;
    while (j < b.length && take(b[j])) j++;
    let segA = a.slice(startA, i);
    let segB = b.slice(startB, j);
    // Segments of different kinds: the numeric one is newer.
    if (segB.length === 0) return numeric ? 1 : -1;
    if (numeric) {
      segA = segA.replace(/^0+/, "");
      segB = segB.replace(/^0+/, "");
      if (segA.length !== segB.length) return segA.length > segB.length ? 1 : -1;
    }
    if (segA !== segB) return segA > segB ? 1 : -1;
  }
  if (i >= a.length && j >= b.length) return 0;
  return i < a.length ? 1 : -1;
}
