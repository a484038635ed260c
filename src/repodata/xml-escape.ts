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

const NEEDS_TEXT_ESCAPE = /[&<>\r]/;
const NEEDS_ATTRIBUTE_ESCAPE = /[&<>"\t\n\r\u0080-\u{10FFFF}]/u;

/** Escapes element text: `& < >` and CR (libxml2 keeps quotes, tabs and newlines literal). */
export function escapeText(value: string): string {
  // Most values need nothing: testing first avoids building a new string for them.
  if (!NEEDS_TEXT_ESCAPE.test(value)) return value;
  return value.replace(/[&<>\r]/g, (c) => TEXT_ESCAPES[c] ?? c);
}

/**
 * Escapes an attribute value: `& < > "` and tab/newline/CR as character references. Non-ASCII is
 * written as `&#xHEX;` like the libxml2 behind createrepo_c 0.17.3 does in attributes; any XML
 * reader decodes it to the same text as raw UTF-8 would be.
 */
export function escapeAttribute(value: string): string {
  if (!NEEDS_ATTRIBUTE_ESCAPE.test(value)) return value;
  return value.replace(/[&<>"\t\n\r\u0080-\u{10FFFF}]/gu, (c) => {
    const simple = ATTRIBUTE_ESCAPES[c];
    if (simple !== undefined) return simple;
    return `&#x${(c.codePointAt(0) ?? 0).toString(16).toUpperCase()};`;
  });
}
