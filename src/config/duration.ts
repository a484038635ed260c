import { ReposyncError } from "../errors.js";

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

// One or more `<integer><unit>` groups, largest unit first by convention: "90s", "5m", "1h30m".
const GROUP = /(\d+)(ms|s|m|h|d)/gy;

/**
 * Parses a duration such as `90s`, `5m`, `1h` or `1h30m` into milliseconds. A bare number is
 * refused on purpose: "60" could mean seconds or minutes, and guessing wrong costs GitHub requests.
 * Throws ReposyncError CONFIG_INVALID with a message naming `what` (a flag or variable name).
 */
export function parseDuration(text: string, what = "duration"): number {
  const trimmed = text.trim();
  let total = 0;
  let matched = 0;
  GROUP.lastIndex = 0;
  for (let m = GROUP.exec(trimmed); m !== null; m = GROUP.exec(trimmed)) {
    const unit = m[2] as keyof typeof UNIT_MS;
    total += Number(m[1]) * UNIT_MS[unit];
    matched = GROUP.lastIndex;
  }
  if (trimmed === "" || matched !== trimmed.length) {
    throw new ReposyncError(
      "CONFIG_INVALID",
      `${what}: "${text}" is not a duration (use a number with a unit, e.g. 90s, 5m, 1h)`,
    );
  }
  if (total <= 0 || !Number.isSafeInteger(total)) {
    throw new ReposyncError("CONFIG_INVALID", `${what}: "${text}" must be longer than zero`);
  }
  return total;
}

/** Formats milliseconds back into the shortest `1h30m`-style text that parseDuration reads. */
export function formatDuration(ms: number): string {
  if (ms <= 0) return "0s";
  let rest = ms;
  let out = "";
  for (const unit of ["d", "h", "m", "s", "ms"] as const) {
    const n = Math.floor(rest / UNIT_MS[unit]);
    if (n > 0) {
      out += `${n}${unit}`;
      rest -= n * UNIT_MS[unit];
    }
  }
  return out;
}
