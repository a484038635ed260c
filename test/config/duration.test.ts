import { describe, expect, it } from "vitest";
import { formatDuration, parseDuration } from "../../src/config/duration.js";
import { isReposyncError } from "../../src/errors.js";

describe("parseDuration", () => {
  it.each([
    ["90s", 90_000],
    ["5m", 300_000],
    ["1h", 3_600_000],
    ["1h30m", 5_400_000],
    ["250ms", 250],
    ["2d", 172_800_000],
    [" 10s ", 10_000],
  ])("reads %j as %d ms", (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(["", "60", "5 m", "5M", "1.5h", "m5", "5x", "-5m", "0s", "5m!", "s"])(
    "refuses %j with CONFIG_INVALID naming the input",
    (text) => {
      let caught: unknown;
      try {
        parseDuration(text, "--interval");
      } catch (err) {
        caught = err;
      }
      expect(isReposyncError(caught, "CONFIG_INVALID")).toBe(true);
      expect((caught as Error).message).toContain("--interval");
      expect((caught as Error).message).toContain(JSON.stringify(text).slice(1, -1));
    },
  );

  it.each([1, 250, 90_000, 300_000, 5_400_000, 90_061_001])(
    "formats %d ms into text that parses back to it",
    (ms) => {
      expect(parseDuration(formatDuration(ms))).toBe(ms);
    },
  );

  it("formats whole units the way a person writes them", () => {
    expect(formatDuration(300_000)).toBe("5m");
    expect(formatDuration(5_400_000)).toBe("1h30m");
  });
});
