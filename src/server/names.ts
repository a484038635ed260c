import { REMOTE_NAME } from "../store/remote-input.js";

/** A remote name as stored (the store's own rule), so a URL can never name anything else. */
export function isRemoteName(name: string): boolean {
  return REMOTE_NAME.test(name);
}

/**
 * A repodata file name as snapshots write them (`<sha256>-primary.xml.gz`), loosely: any file
 * name of letters, digits, dot, dash and underscore that does not start with a dot. Files are
 * looked up in the database by exact name, never on disk; this only turns junk into a 400.
 */
export function isRepodataFileName(name: string): boolean {
  return /^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$/.test(name);
}

/** An asset id: GitHub's are positive integers well inside the safe range. */
export function parseAssetId(text: string): number | undefined {
  if (!/^[1-9][0-9]{0,15}$/.test(text)) return undefined;
  const id = Number(text);
  return Number.isSafeInteger(id) ? id : undefined;
}

/**
 * An asset file name in a URL: no path separators, no control characters, not a dot segment.
 * It is compared with the stored asset's name and never used as a path.
 */
export function isAssetFileName(name: string): boolean {
  if (name === "." || name === ".." || name.length > 255) return false;
  for (const ch of name) {
    const c = ch.charCodeAt(0);
    if (ch === "/" || ch === "\\" || c < 0x20 || c === 0x7f) return false;
  }
  return true;
}
