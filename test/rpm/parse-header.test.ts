import { describe, expect, it } from "vitest";
import { isReposyncError } from "../../src/errors.js";
import type { RpmPackage } from "../../src/rpm/package.js";
import { type ParseOptions, parseRpmPrefix } from "../../src/rpm/parse-header.js";
import { basicMain, buildRpm, type EntrySpec } from "./header-builder.js";

const STRONG = 1 << 27;

function parse(bytes: Buffer, options?: ParseOptions): RpmPackage {
  const step = parseRpmPrefix(bytes, options);
  if (step.kind !== "package") throw new Error(`needs ${step.start}-${step.end}`);
  return step.pkg;
}

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (isReposyncError(err)) return err.code;
    throw err;
  }
  return "no error";
}

const str = (tag: number, value: string): EntrySpec => ({ tag, data: { type: "string", value } });
const strs = (tag: number, values: string[]): EntrySpec => ({
  tag,
  data: { type: "strings", values },
});
const i32 = (tag: number, values: number[]): EntrySpec => ({
  tag,
  data: { type: "int32", values },
});
const i16 = (tag: number, values: number[]): EntrySpec => ({
  tag,
  data: { type: "int16", values },
});
const i64 = (tag: number, values: number[]): EntrySpec => ({
  tag,
  data: { type: "int64", values },
});

describe("parseRpmPrefix steps", () => {
  const rpm = buildRpm({ main: basicMain(), payload: 10 });

  it("asks for the signature intro, then hstart+16, then hend, each from the prefix's end", () => {
    expect(parseRpmPrefix(Buffer.alloc(0))).toEqual({ kind: "need", start: 0, end: 112 });
    expect(parseRpmPrefix(rpm.bytes.subarray(0, 50))).toEqual({
      kind: "need",
      start: 50,
      end: 112,
    });
    expect(parseRpmPrefix(rpm.bytes.subarray(0, 112))).toEqual({
      kind: "need",
      start: 112,
      end: rpm.headerStart + 16,
    });
    expect(parseRpmPrefix(rpm.bytes.subarray(0, rpm.headerStart + 16))).toEqual({
      kind: "need",
      start: rpm.headerStart + 16,
      end: rpm.headerEnd,
    });
    const pkg = parse(rpm.bytes.subarray(0, rpm.headerEnd));
    expect([pkg.name, pkg.headerStart, pkg.headerEnd]).toEqual([
      "demo",
      rpm.headerStart,
      rpm.headerEnd,
    ]);
    expect(pkg.fileSize).toBe(rpm.bytes.length);
  });

  it("accepts any Uint8Array, not only a Buffer", () => {
    const copy = new Uint8Array(rpm.bytes.length + 8).subarray(8);
    copy.set(rpm.bytes);
    expect(parse(Buffer.from(copy)).name).toBe("demo");
    const step = parseRpmPrefix(copy);
    expect(step.kind === "package" && step.pkg.name).toBe("demo");
  });

  it("refuses to need bytes past maxHeaderBytes or past the known file size", () => {
    expect(
      codeOf(() => parseRpmPrefix(rpm.bytes.subarray(0, 112), { maxHeaderBytes: rpm.headerStart })),
    ).toBe("RPM_LIMIT");
    expect(codeOf(() => parseRpmPrefix(rpm.bytes, { maxHeaderBytes: rpm.headerEnd - 1 }))).toBe(
      "RPM_LIMIT",
    );
    expect(
      codeOf(() => parseRpmPrefix(rpm.bytes.subarray(0, 112), { fileSize: rpm.headerStart })),
    ).toBe("RPM_TRUNCATED");
    expect(codeOf(() => parseRpmPrefix(Buffer.alloc(0), { fileSize: 100 }))).toBe("RPM_TRUNCATED");
  });

  it("reports a header whose stated size differs from the known file size", () => {
    expect(parse(rpm.bytes, { fileSize: rpm.bytes.length }).fileSize).toBe(rpm.bytes.length);
    expect(codeOf(() => parseRpmPrefix(rpm.bytes, { fileSize: rpm.bytes.length + 1 }))).toBe(
      "RPM_SIZE_MISMATCH",
    );
  });

  it("checks the lead: magic (from the first byte), major 3 or 4, type, signature type", () => {
    expect(codeOf(() => parseRpmPrefix(Buffer.from([0xed, 0x00])))).toBe("RPM_BAD_LEAD");
    expect(codeOf(() => parseRpmPrefix(Buffer.from("<html>hello</html>")))).toBe("RPM_BAD_LEAD");
    const v4 = buildRpm({ main: basicMain(), lead: { major: 4 } });
    expect(parse(v4.bytes).name).toBe("demo");
    const v5 = buildRpm({ main: basicMain(), lead: { major: 5 } });
    expect(codeOf(() => parseRpmPrefix(v5.bytes))).toBe("RPM_BAD_LEAD");
    const badType = buildRpm({ main: basicMain(), lead: { type: 2 } });
    expect(codeOf(() => parseRpmPrefix(badType.bytes))).toBe("RPM_BAD_LEAD");
    const badSig = Buffer.from(rpm.bytes);
    badSig.writeUInt16BE(1, 78);
    expect(codeOf(() => parseRpmPrefix(badSig))).toBe("RPM_BAD_LEAD");
  });
});

describe("header checks (rpm's sanity limits)", () => {
  const withEntry = (e: EntrySpec) => buildRpm({ main: [...basicMain(), e] }).bytes;

  it("refuses nindex past 0xFFFF and hsize past 0x0FFFFFFF in either header", () => {
    const rpm = buildRpm({ main: basicMain() });
    const a = Buffer.from(rpm.bytes);
    a.writeUInt32BE(0x10000, 96 + 8);
    expect(codeOf(() => parseRpmPrefix(a))).toBe("RPM_LIMIT");
    const b = Buffer.from(rpm.bytes);
    b.writeUInt32BE(0x10000000, rpm.headerStart + 12);
    expect(codeOf(() => parseRpmPrefix(b, { maxHeaderBytes: 2 ** 31 }))).toBe("RPM_LIMIT");
    const c = Buffer.from(rpm.bytes);
    c[rpm.headerStart] = 0;
    expect(codeOf(() => parseRpmPrefix(c))).toBe("RPM_BAD_HEADER");
  });

  it("refuses entries with a bad type, offset, count, alignment or unterminated string", () => {
    const bad: EntrySpec[] = [
      { ...i32(1009, [1]), raw: { type: 10 } },
      { ...i32(1009, [1]), raw: { offset: -4 } },
      { ...i32(1009, [1]), raw: { offset: 1 << 20 } },
      { ...i32(1009, [1]), raw: { count: 0xffffffff } },
      { ...i32(1009, [1]), raw: { count: 0 } },
      { ...i32(1009, [1]), raw: { offset: 2 } },
      { ...i64(5009, [1]), raw: { offset: 4 } },
      { ...i16(1030, [1]), raw: { offset: 1 } },
      { ...str(1004, "x"), raw: { count: 2 } },
      { ...strs(1047, ["a", "b"]), raw: { count: 3 } },
      {
        tag: 1004,
        data: { type: "bin", bytes: Buffer.from("no nul") },
        raw: { type: 6, count: 1 },
      },
    ];
    for (const e of bad) {
      // The broken entry is the last one, so an unterminated string runs to the store's end.
      expect(
        codeOf(() => parseRpmPrefix(withEntry(e))),
        JSON.stringify(e.raw),
      ).toBe("RPM_BAD_HEADER");
    }
  });

  it("refuses a tag of the wrong kind and a package without NAME, VERSION or RELEASE", () => {
    expect(codeOf(() => parseRpmPrefix(withEntry(i32(1004, [1]))))).toBe("RPM_BAD_HEADER");
    for (const tag of [1000, 1001, 1002]) {
      const main = basicMain().filter((e) => e.tag !== tag);
      expect(codeOf(() => parseRpmPrefix(buildRpm({ main }).bytes))).toBe("RPM_MISSING_TAG");
    }
  });

  it("decodes each entry from its own type and count, whatever lies between entries", () => {
    const rpm = buildRpm({
      main: [
        { ...str(1004, "the summary"), gapBefore: 3 },
        ...basicMain(),
        { ...strs(1047, ["p1", "p2"]), gapBefore: 5 },
        { ...i32(1112, [8, 0]), gapBefore: 7 },
        { ...strs(1113, ["1-1", ""]), gapBefore: 1 },
        { tag: 62, data: { type: "bin", bytes: Buffer.alloc(16, 0xff) } },
        { tag: 1005, data: { type: "i18n", values: ["first locale", "second"] } },
      ],
    });
    const pkg = parse(rpm.bytes);
    expect(pkg.summary).toBe("the summary");
    expect(pkg.description).toBe("first locale");
    expect(pkg.dependencies.provides).toEqual([
      { name: "p1", flags: 8, version: "1-1" },
      { name: "p2", flags: 0, version: "" },
    ]);
  });

  it("refuses dependency and file arrays of mismatched lengths", () => {
    const deps = buildRpm({ main: [...basicMain(), strs(1047, ["a", "b"]), i32(1112, [0])] });
    expect(codeOf(() => parseRpmPrefix(deps.bytes))).toBe("RPM_BAD_HEADER");
    const files = buildRpm({
      main: [...basicMain(), strs(1117, ["a"]), strs(1118, ["/x/"]), i32(1116, [1])],
    });
    expect(codeOf(() => parseRpmPrefix(files.bytes))).toBe("RPM_BAD_HEADER");
  });
});

describe("the package model", () => {
  it("maps legacy weak dependencies by their strong bit, after the current tags", () => {
    const pkg = parse(
      buildRpm({
        main: [
          ...basicMain(),
          strs(5049, ["new-suggest"]),
          strs(1156, ["old-suggest", "old-recommend"]),
          i32(1158, [0, STRONG | 12]),
          strs(1157, ["", "2.0"]),
          strs(1159, ["old-supplement", "old-enhance"]),
          i32(1161, [STRONG, 0]),
          strs(1160, ["", ""]),
        ],
      }).bytes,
    );
    expect(pkg.dependencies.suggests.map((d) => d.name)).toEqual(["new-suggest", "old-suggest"]);
    expect(pkg.dependencies.recommends).toEqual([
      { name: "old-recommend", flags: STRONG | 12, version: "2.0" },
    ]);
    expect(pkg.dependencies.supplements.map((d) => d.name)).toEqual(["old-supplement"]);
    expect(pkg.dependencies.enhances.map((d) => d.name)).toEqual(["old-enhance"]);
  });

  it("types files: a directory stays a directory when ghost, ghosts, plain files", () => {
    const pkg = parse(
      buildRpm({
        main: [
          ...basicMain(),
          strs(1117, ["d", "g", "f", "gd"]),
          strs(1118, ["/usr/", "/etc/x/"]),
          i32(1116, [0, 1, 1, 0]),
          i16(1030, [0o40755, 0o100644, 0o100644, 0o40755]),
          i32(1037, [0, 0x40, 0, 0x40]),
        ],
      }).bytes,
    );
    expect(pkg.files).toEqual([
      { path: "/usr/d", type: "dir" },
      { path: "/etc/x/g", type: "ghost" },
      { path: "/etc/x/f", type: "file" },
      { path: "/usr/gd", type: "dir" },
    ]);
  });

  it("reads OLDFILENAMES when an ancient package has no BASENAMES", () => {
    const pkg = parse(
      buildRpm({ main: [...basicMain(), strs(1027, ["/bin/sh", "/etc/a"])] }).bytes,
    );
    expect(pkg.files.map((f) => f.path)).toEqual(["/bin/sh", "/etc/a"]);
  });

  it("takes v6 sizes from the main header when the signature has none", () => {
    const rpm = buildRpm({
      main: [...basicMain(), i64(5112, [123]), i64(5113, [456])],
      payload: 123,
      sizeInSignature: false,
      lead: { major: 4 },
    });
    const pkg = parse(rpm.bytes, { fileSize: rpm.bytes.length });
    expect(pkg.fileSize).toBe(rpm.headerEnd + 123);
    expect(pkg.archiveSize).toBe(456);
  });

  it("prefers LONG sizes and falls back to the main ARCHIVESIZE", () => {
    const big = 5 * 2 ** 32 + 7;
    const rpm = buildRpm({
      signature: [i64(270, [big]), i64(271, [big + 1])],
      main: [...basicMain(), i32(1009, [10]), i64(5009, [big + 2]), i32(1046, [99])],
      sizeInSignature: false,
    });
    const pkg = parse(rpm.bytes);
    expect([pkg.fileSize, pkg.archiveSize, pkg.installedSize]).toEqual([
      rpm.headerStart + big,
      big + 1,
      big + 2,
    ]);
    const plain = parse(buildRpm({ main: [...basicMain(), i32(1046, [99])] }).bytes);
    expect([plain.archiveSize, plain.installedSize, plain.epoch, plain.buildTime]).toEqual([
      99,
      0,
      null,
      0,
    ]);
  });

  it("makes a source package's arch src and its sourcerpm empty", () => {
    const main = [...basicMain(), { tag: 1106, data: { type: "int32", values: [1] } } as EntrySpec];
    const pkg = parse(buildRpm({ main, lead: { type: 1 } }).bytes);
    expect([pkg.isSource, pkg.arch, pkg.sourceRpm]).toEqual([true, "src", ""]);
    const binary = parse(buildRpm({ main: [...basicMain(), str(1044, "demo.src.rpm")] }).bytes);
    expect([binary.isSource, binary.arch, binary.sourceRpm]).toEqual([
      false,
      "x86_64",
      "demo.src.rpm",
    ]);
  });

  it("decodes non-UTF-8 strings as Latin-1 without C1 bytes, as createrepo_c does", () => {
    const rpm = buildRpm({ main: [...basicMain(), str(1004, "PLACEHOLDER")] });
    const at = rpm.bytes.indexOf("PLACEHOLDER");
    Buffer.from([0x42, 0xe9, 0xb9, 0x7f, 0x80, 0xc0, 0xff, 0xa0, 0xbf, 0x21, 0x21]).copy(
      rpm.bytes,
      at,
    );
    expect(parse(rpm.bytes).summary).toBe("Bé\x7fÀÿ!!");
  });
});
