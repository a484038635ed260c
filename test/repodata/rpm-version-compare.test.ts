import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { rpmVersionCompare } from "../../src/repodata/rpm-version-compare.js";
import { haveTools } from "../support/tools.js";

const CASES: [string, string, number][] = [
  ["1.0", "1.0", 0],
  ["2.14", "2.3.4", 1],
  ["2.2.5", "2.3", -1],
  ["1.0010", "1.9", 1],
  ["1.05", "1.5", 0],
  ["1.0", "1.0.1", -1],
  ["1.0a", "1.0", 1],
  ["1.0~rc1", "1.0", -1],
  ["1.0~rc1", "1.0~rc2", -1],
  ["1.0^git1", "1.0", 1],
  ["1.0^git1", "1.0.1", -1],
  ["1.a", "1.1", -1],
  ["1_0", "1.0", 0],
];

const sign = (n: number) => (n > 0 ? 1 : n < 0 ? -1 : 0);

describe("rpmVersionCompare", () => {
  it.each(CASES)("orders %s against %s as rpm does (%i)", (a, b, expected) => {
    expect(sign(rpmVersionCompare(a, b))).toBe(expected);
    expect(sign(rpmVersionCompare(b, a))).toBe(sign(-expected));
  });

  it.skipIf(!haveTools("rpm"))("agrees with rpm's own rpm.vercmp on every case", () => {
    const calls = CASES.map(([a, b]) => `rpm.vercmp("${a}", "${b}")`).join(", ");
    const out = execFileSync("rpm", ["--eval", `%{lua: print(table.concat({${calls}}, ","))}`], {
      encoding: "utf8",
    });
    const theirs = out.trim().split(",").map(Number);
    expect(CASES.map(([a, b]) => sign(rpmVersionCompare(a, b)))).toEqual(theirs);
  });
});
