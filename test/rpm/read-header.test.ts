import { execFileSync } from "node:child_process";
import {
  appendFileSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isReposyncError } from "../../src/errors.js";
import { parseRpmPrefix } from "../../src/rpm/parse-header.js";
import { type RangeReader, readRpmFile, readRpmHeader } from "../../src/rpm/read-header.js";
import { CORPUS_DIR, haveTools } from "../support/tools.js";
import { children, createrepo } from "./reference.js";

const FILE_COUNT = 3000;

/** A spec whose header is far beyond 64 KiB: thousands of files with long names. */
const BIG_SPEC = `Name: bigheader
Version: 1
Release: 1
Summary: A package with a header larger than the first read
License: MIT
BuildArch: noarch

%description
Thousands of files make a header of several hundred KiB.

%install
mkdir -p %{buildroot}/usr/share/bigheader
cd %{buildroot}/usr/share/bigheader
for i in $(seq 1 ${FILE_COUNT}); do : > file-with-a-rather-long-name-to-grow-the-header-$i; done

%files
/usr/share/bigheader
`;

/** A reader over bytes that records the ranges asked for; `ignoreEnd` answers like a 200. */
function recordingReader(bytes: Buffer, ignoreEnd = false) {
  const ranges: Array<[number, number]> = [];
  const read: RangeReader = async (start, end) => {
    ranges.push([start, end]);
    return bytes.subarray(start, ignoreEnd ? bytes.length : end);
  };
  return { read, ranges };
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (isReposyncError(err)) return err.code;
    throw err;
  }
  return "no error";
}

const archer = () => readFileSync(path.join(CORPUS_DIR, "Archer-3.4.5-6.x86_64.rpm"));

describe("readRpmHeader on a normal package", () => {
  it("reads one 64 KiB range and gets the package parsed from the whole file", async () => {
    const bytes = archer();
    const { read, ranges } = recordingReader(bytes);
    const result = await readRpmHeader(read);
    expect(ranges).toEqual([[0, 65536]]);
    expect(result.reads).toBe(1);
    expect(result.bytesRead).toBe(bytes.length);
    const whole = parseRpmPrefix(bytes);
    expect(whole.kind === "package" && whole.pkg).toEqual(result.pkg);
  });

  it("works with a reader that returns the whole file (200 semantics)", async () => {
    const bytes = archer();
    const { read } = recordingReader(bytes, true);
    const result = await readRpmHeader(read, { firstRead: 200 });
    expect(result.reads).toBe(1);
    expect(result.pkg.name).toBe("Archer");
  });

  it("with a small first read, asks for exactly hstart+16 and then exactly hend", async () => {
    const bytes = archer();
    const { read, ranges } = recordingReader(bytes);
    const result = await readRpmHeader(read, { firstRead: 200 });
    const { headerStart, headerEnd } = result.pkg;
    expect(ranges).toEqual([
      [0, 200],
      [200, headerStart + 16],
      [headerStart + 16, headerEnd],
    ]);
    expect(result.bytesRead).toBe(headerEnd);
  });

  it("copes with a reader that returns short ranges before the end of the file", async () => {
    const bytes = archer();
    let reads = 0;
    const result = await readRpmHeader(async (start, end) => {
      reads++;
      return bytes.subarray(start, Math.min(end, start + 1000));
    });
    expect(result.pkg.name).toBe("Archer");
    expect(result.reads).toBe(reads);
    expect(reads).toBe(Math.ceil(result.pkg.headerEnd / 1000));
  });

  it("fails with RPM_TRUNCATED when the file ends inside the header", async () => {
    const bytes = archer();
    const whole = parseRpmPrefix(bytes);
    if (whole.kind !== "package") throw new Error("corpus package did not parse");
    const cut = bytes.subarray(0, whole.pkg.headerEnd - 1);
    expect(await codeOf(readRpmHeader(recordingReader(cut).read))).toBe("RPM_TRUNCATED");
    expect(
      await codeOf(
        readRpmHeader(recordingReader(cut).read, { fileSize: cut.length, firstRead: 100 }),
      ),
    ).toBe("RPM_TRUNCATED");
  });
});

describe.skipIf(!haveTools("rpmbuild", "createrepo_c"))(
  "a package whose header exceeds 64 KiB",
  () => {
    let top = "";
    let rpmPath = "";
    let bytes = Buffer.alloc(0);
    let headerRange = { start: "", end: "" };

    beforeAll(() => {
      top = mkdtempSync(path.join(tmpdir(), "reposync-bigheader-"));
      mkdirSync(path.join(top, "SPECS"));
      writeFileSync(path.join(top, "SPECS", "bigheader.spec"), BIG_SPEC);
      execFileSync(
        "rpmbuild",
        [
          "--define",
          `_topdir ${top}`,
          "--define",
          "__os_install_post %{nil}",
          "--define",
          "_build_id_links none",
          "-bb",
          path.join(top, "SPECS", "bigheader.spec"),
        ],
        { stdio: "ignore" },
      );
      const repo = path.join(top, "repo");
      mkdirSync(repo);
      const built = path.join(top, "RPMS", "noarch");
      const name = readdirSync(built).find((n) => n.endsWith(".rpm"))!;
      rpmPath = path.join(repo, name);
      copyFileSync(path.join(built, name), rpmPath);
      bytes = readFileSync(rpmPath);
      const ref = createrepo(repo).get(name)!;
      const format = children(ref.primary, "format")[0];
      const attrs = children(format, "rpm:header-range")[0]?._attributes;
      headerRange = { start: attrs?.start ?? "", end: attrs?.end ?? "" };
    }, 120_000);
    afterAll(() => {
      if (top) rmSync(top, { recursive: true, force: true });
    });

    it("reads two ranges: 64 KiB, then exactly up to hend", async () => {
      const { read, ranges } = recordingReader(bytes);
      const result = await readRpmHeader(read);
      const { pkg } = result;
      expect(pkg.headerEnd).toBeGreaterThan(65536);
      expect({ start: String(pkg.headerStart), end: String(pkg.headerEnd) }).toEqual(headerRange);
      expect(ranges).toEqual([
        [0, 65536],
        [65536, pkg.headerEnd],
      ]);
      expect(result.reads).toBe(2);
      expect(pkg.files.length).toBe(FILE_COUNT + 1);
      expect(pkg.fileSize).toBe(bytes.length);
    });

    it("reads it in one go from a reader that returns the whole file", async () => {
      const result = await readRpmHeader(recordingReader(bytes, true).read);
      expect(result.reads).toBe(1);
      expect(result.pkg.files.length).toBe(FILE_COUNT + 1);
    });

    it("refuses it with RPM_LIMIT, asking for nothing past the limit, when the limit is lower", async () => {
      const { read, ranges } = recordingReader(bytes);
      expect(await codeOf(readRpmHeader(read, { maxHeaderBytes: 100_000 }))).toBe("RPM_LIMIT");
      expect(ranges).toEqual([[0, 65536]]);
    });

    it("readRpmFile reads it and checks its size against the file", async () => {
      const pkg = await readRpmFile(rpmPath);
      expect(pkg.name).toBe("bigheader");
      const grown = path.join(top, "grown.rpm");
      copyFileSync(rpmPath, grown);
      appendFileSync(grown, "x");
      expect(await codeOf(readRpmFile(grown))).toBe("RPM_SIZE_MISMATCH");
      const cut = path.join(top, "cut.rpm");
      copyFileSync(rpmPath, cut);
      truncateSync(cut, pkg.headerEnd - 10);
      expect(await codeOf(readRpmFile(cut))).toBe("RPM_TRUNCATED");
    });
  },
);

describe("readRpmFile failures", () => {
  let dir = "";
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "reposync-readfile-"));
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("reports a missing file as IO_ERROR and a non-RPM as RPM_BAD_LEAD", async () => {
    expect(await codeOf(readRpmFile(path.join(dir, "absent.rpm")))).toBe("IO_ERROR");
    const text = path.join(dir, "text.rpm");
    writeFileSync(text, "this is not a package\n".repeat(10));
    expect(await codeOf(readRpmFile(text))).toBe("RPM_BAD_LEAD");
    const empty = path.join(dir, "empty.rpm");
    writeFileSync(empty, "");
    expect(await codeOf(readRpmFile(empty))).toBe("RPM_TRUNCATED");
  });
});
