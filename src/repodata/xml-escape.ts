import { ReposyncError } from "../errors.js";

/**
 * XML escaping as createrepo_c 0.17.3 (through libxml2) writes it, so our open XML matches its
 * bytes, not just its meaning. Hand-written: the rules are four lines and a serialiser library
 * would pick its own (equally valid, but different) escapes.
 *
 * Both functions first test with a regex (native code, the fast path for the many values that
 * need nothing), then rewrite in one char loop. The loop, rather than `replace` with a callback,
 * because changelog authors ("Name <mail>") take that path in almost every package.
 */

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are refused, so they must be found.
const NEEDS_TEXT_ESCAPE = /[&<>\r\x00-\x08\x0B\x0C\x0E-\x1F]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: as above.
const NEEDS_ATTRIBUTE_ESCAPE = /[&<>"\t\n\r\x00-\x08\x0B\x0C\x0E-\x1F\u0080-\u{10FFFF}]/u;

const TAB = 9;
const LF = 10;
const CR = 13;

/**
 * A control character other than tab, LF and CR cannot appear in XML 1.0 even as a reference, and
 * createrepo_c refuses such a package ("Forbidden control chars found"); so do we.
 */
function refuse(code: number): never {
  const hex = code.toString(16).toUpperCase().padStart(4, "0");
  throw new ReposyncError(
    "RPM_FORBIDDEN_TEXT",
    `its metadata contains the control character U+${hex}, which XML cannot carry (createrepo_c refuses it too)`,
  );
}

/** The reference for `& < >`, or undefined for any other character. */
function markupReference(code: number): string | undefined {
  switch (code) {
    case 0x26:
      return "&amp;";
    case 0x3c:
      return "&lt;";
    case 0x3e:
      return "&gt;";
    default:
      return undefined;
  }
}

/**
 * Escapes element text: `& < >` and CR (libxml2 keeps quotes, tabs and newlines literal).
 * Throws RPM_FORBIDDEN_TEXT on other control characters.
 */
export function escapeText(value: string): string {
  if (!NEEDS_TEXT_ESCAPE.test(value)) return value;
  let out = "";
  let from = 0;
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    let reference: string | undefined;
    if (code < 0x20) {
      if (code === TAB || code === LF) continue;
      if (code !== CR) refuse(code);
      reference = "&#13;";
    } else {
      reference = markupReference(code);
      if (reference === undefined) continue;
    }
    out += value.slice(from, i) + reference;
    from = i + 1;
  }
  return out + value.slice(from);
}

/**
 * Escapes an attribute value: `& < > "` and tab/newline/CR as character references. Non-ASCII is
 * written as `&#xHEX;` like the libxml2 behind createrepo_c 0.17.3 does in attributes; any XML
 * reader decodes it to the same text as raw UTF-8 would be.
 */
export function escapeAttribute(value: string): string {
  if (!NEEDS_ATTRIBUTE_ESCAPE.test(value)) return value;
  let out = "";
  let from = 0;
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    let reference: string | undefined;
    let units = 1;
    if (code >= 0x80) {
      // One reference per code point: a surrogate pair is one character.
      const point = value.codePointAt(i) ?? code;
      if (point > 0xffff) units = 2;
      reference = `&#x${point.toString(16).toUpperCase()};`;
    } else if (code < 0x20) {
      if (code !== TAB && code !== LF && code !== CR) refuse(code);
      reference = `&#${code};`;
    } else if (code === 0x22) {
      reference = "&quot;";
    } else {
      reference = markupReference(code);
      if (reference === undefined) continue;
    }
    out += value.slice(from, i) + reference;
    from = i + units;
    i += units - 1;
  }
  return out + value.slice(from);
}
