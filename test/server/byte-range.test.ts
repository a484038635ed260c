import { describe, expect, it } from "vitest";
import { parseByteRange } from "../../src/server/byte-range.js";

describe("parseByteRange", () => {
  it("reads a closed range, an open-ended one (a resumed download) and a suffix", () => {
    expect(parseByteRange("bytes=0-99", 1000)).toEqual({ start: 0, end: 99 });
    expect(parseByteRange("bytes=500-", 1000)).toEqual({ start: 500, end: 999 });
    expect(parseByteRange("bytes=-100", 1000)).toEqual({ start: 900, end: 999 });
  });

  it("clips an end past the file and a suffix longer than the file", () => {
    expect(parseByteRange("bytes=990-5000", 1000)).toEqual({ start: 990, end: 999 });
    expect(parseByteRange("bytes=-5000", 1000)).toEqual({ start: 0, end: 999 });
  });

  it("calls a start at or past the end, an empty suffix and any range of an empty file unsatisfiable", () => {
    expect(parseByteRange("bytes=1000-", 1000)).toBe("unsatisfiable");
    expect(parseByteRange("bytes=-0", 1000)).toBe("unsatisfiable");
    expect(parseByteRange("bytes=0-", 0)).toBe("unsatisfiable");
  });

  it("ignores what it does not understand, so the whole file is sent", () => {
    for (const header of [
      undefined,
      "",
      "bytes=",
      "bytes=-",
      "bytes=5-2",
      "bytes=0-1,5-9",
      "items=0-1",
      "bytes=a-b",
      "bytes=99999999999999999999-",
    ]) {
      expect(parseByteRange(header, 1000), String(header)).toBeUndefined();
    }
  });
});
