import { isUtf8 } from "node:buffer";

/**
 * Decodes one string of an RPM header the way createrepo_c (0.17.3) turns it into XML text.
 *
 * RPM headers carry bytes, not text: old packages were built with ISO-8859-x spec files. What we
 * found by running createrepo_c on the corpus (balicek-iso88591/-iso88592) and on packages built
 * for the purpose with `_invalid_encoding_terminates_build 0`:
 * - a string that is valid UTF-8 is written as it is;
 * - any other string is read as Latin-1, except that bytes 0x80..0xBF are dropped (createrepo_c
 *   takes them for misencoded CP-1252 controls): "Bal\xed\xe8ek \xb9" becomes "Balíèek ";
 *   0x7F stays, 0xC0..0xFF become U+00C0..U+00FF;
 * - a string holding control characters below 0x20 other than tab, LF and CR makes createrepo_c
 *   refuse the whole package ("Forbidden control chars found"). They are kept here as they are;
 *   what to do with such a package is the repodata writer's decision, not the parser's.
 * Validity is judged per string (as createrepo_c does), with Node's native UTF-8 validator, which
 * like GLib's rejects overlong forms, surrogates and code points past U+10FFFF.
 */
export function decodeHeaderText(bytes: Buffer, start = 0, end = bytes.length): string {
  // Decoding first is the fast path: Node's decoder turns every invalid sequence into U+FFFD,
  // so only a string containing one needs the (rarer) validity check.
  const text = bytes.toString("utf8", start, end);
  if (!text.includes("\uFFFD") || isUtf8(bytes.subarray(start, end))) return text;
  return latin1WithoutC1(bytes.subarray(start, end));
}

function latin1WithoutC1(bytes: Buffer): string {
  // Rare path (only legacy-encoded packages reach it), so a byte loop is fine here.
  const kept = Buffer.allocUnsafe(bytes.length);
  let n = 0;
  for (const b of bytes) {
    if (b >= 0x80 && b < 0xc0) continue;
    kept[n++] = b;
  }
  return kept.toString("latin1", 0, n);
}
