import { ReposyncError } from "../errors.js";

/**
 * XML escaping as createrepo_c 0.17.3 (through libxml2) writes it, so our open XML matches its
 * bytes, not just its meaning. Hand-written: the rules are four lines and a serialiser library
 * would pick its own (equally valid, but different) escapes.
 */

const TEXT_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  "\r": "&#13;",
};

const ATTRIBUTE_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "\t": "&#9;",
  "\n": "&#10;",
  "\r": "&#13;",
};

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are refused, so they must be found.
const NEEDS_TEXT_ESCAPE = /[&<>\r\x00-\x08\x0B\x0C\x0E-\x1F]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: as above.
const NEEDS_ATTRIBUTE_ESCAPE = /[&<>"\t\n\r\x00-\x08\x0B\x0C\x0E-\x1F\u0080-\u{10FFFF}]/u;

/**
 * A control character other than tab, LF and CR cannot appear in XML 1.0 even as a reference, and
 * createrepo_c refuses such a package ("Forbidden control chars found"); so do we.
 */
function refuse(c: string): never {
  const code = (c.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0");
  throw new ReposyncError(
    "RPM_FORBIDDEN_TEXT",
    `its metadata contains the control character U+${code}, which XML cannot carry (createrepo_c refuses it too)`,
  );
}

/**
 * Escapes element text: `& < >` and CR (libxml2 keeps quotes, tabs and newlines literal).
 * Throws RPM_FORBIDDEN_TEXT on other control characters.
 */
export function escapeText(value: string): string {
  // Most values need nothing: testing first avoids building a new string for them.
  if (!NEEDS_TEXT_ESCAPE.test(value)) return value;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: as above.
  return value.replace(/[&<>\r\x00-\x08\x0B\x0C\x0E-\x1F]/g, (c) => TEXT_ESCAPES[c] ?? refuse(c));
}

/**
 * Escapes an attribute value: `& < > "` and tab/newline/CR as character references. Non-ASCII is
 * written as `&#xHEX;` like the libxml2 behind createrepo_c 0.17.3 does in attributes; any XML
 * reader decodes it to the same text as raw UTF-8 would be.
 */
export function escapeAttribute(value: string): string {
  if (!NEEDS_ATTRIBUTE_ESCAPE.test(value)) return value;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: as above.
  return value.replace(/[&<>"\t\n\r\x00-\x08\x0B\x0C\x0E-\x1F\u0080-\u{10FFFF}]/gu, (c) => {
    const simple = ATTRIBUTE_ESCAPES[c];
    if (simple !== undefined) return simple;
    if (c < " ") return refuse(c);
    return `&#x${(c.codePointAt(0) ?? 0).toString(16).toUpperCase()};`;
  });
}
