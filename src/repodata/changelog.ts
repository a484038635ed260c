import type { ChangelogEntry } from "../rpm/package.js";

/**
 * The changelog entries other.xml shows: the newest `limit` of the header (rpm stores newest
 * first), written oldest first, author without trailing spaces, and dates made strictly
 * increasing. createrepo_c 0.17.3 bumps a date that is not after the one written before it to that
 * one + 1 (three entries of one day become T, T+1, T+2), so a reader that keys entries by date
 * keeps them all. Checked against its output on a package with equal and near-equal dates.
 */
export function selectChangelog(
  entries: readonly ChangelogEntry[],
  limit: number,
): ChangelogEntry[] {
  const newest = entries.slice(0, Math.max(0, limit)).reverse();
  const out: ChangelogEntry[] = [];
  let previous = Number.NEGATIVE_INFINITY;
  for (const entry of newest) {
    const date = entry.date <= previous ? previous + 1 : entry.date;
    out.push({ author: entry.author.replace(/ +$/, ""), date, text: entry.text });
    previous = date;
  }
  return out;
}
