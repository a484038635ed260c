import { createHash } from "node:crypto";
import { gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { isReposyncError } from "../../src/errors.js";
import { renderPackage } from "../../src/repodata/fragments.js";
import { buildSnapshot, compareLocations, SnapshotWriter } from "../../src/repodata/snapshot.js";
import { CONTEXT, makePackage } from "./make-package.js";

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

function fragmentsFor(names: string[]) {
  return names.map((name) =>
    renderPackage(makePackage({ name }), { ...CONTEXT, locationHref: `${name}-1.0-1.x86_64.rpm` }),
  );
}

async function* slowly<T>(items: T[]): AsyncIterable<T> {
  for (const item of items) {
    await Promise.resolve();
    yield item;
  }
}

describe("compareLocations", () => {
  it("orders by basename first, then by the whole href", () => {
    const hrefs = ["z/b.rpm", "a.rpm", "y/a.rpm", "x/b.rpm", "B.rpm"];
    expect([...hrefs].sort(compareLocations)).toEqual([
      "B.rpm",
      "a.rpm",
      "y/a.rpm",
      "x/b.rpm",
      "z/b.rpm",
    ]);
  });
});

describe("buildSnapshot", () => {
  it("names each file by the sha256 of its compressed bytes and states true figures in repomd.xml", async () => {
    const snap = await buildSnapshot(fragmentsFor(["a", "b"]), { packages: 2, revision: 1234 });
    expect(snap.files.map((f) => f.type)).toEqual(["primary", "filelists", "other"]);
    const repomd = snap.repomd.toString("utf8");
    expect(repomd).toContain("<revision>1234</revision>");
    for (const f of snap.files) {
      const open = gunzipSync(f.bytes);
      expect(f.name).toBe(`${sha256(f.bytes)}-${f.type}.xml.gz`);
      expect(f.size).toBe(f.bytes.length);
      expect(f.openSha256).toBe(sha256(open));
      expect(f.openSize).toBe(open.length);
      expect(repomd).toContain(
        `  <data type="${f.type}">\n    <checksum type="sha256">${f.sha256}</checksum>\n` +
          `    <open-checksum type="sha256">${f.openSha256}</open-checksum>\n` +
          `    <location href="repodata/${f.name}"/>\n    <timestamp>1234</timestamp>\n` +
          `    <size>${f.size}</size>\n    <open-size>${f.openSize}</open-size>\n  </data>\n`,
      );
    }
  });

  it("wraps the fragments in root elements that state the package count", async () => {
    const fragments = fragmentsFor(["a", "b"]);
    const snap = await buildSnapshot(slowly(fragments), { packages: 2, revision: 1 });
    const primary = gunzipSync(snap.files[0]?.bytes ?? Buffer.alloc(0)).toString("utf8");
    expect(primary).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n' +
        '<metadata xmlns="http://linux.duke.edu/metadata/common" xmlns:rpm="http://linux.duke.edu/metadata/rpm" packages="2">\n' +
        `${fragments[0]?.primary}${fragments[1]?.primary}</metadata>`,
    );
    const other = gunzipSync(snap.files[2]?.bytes ?? Buffer.alloc(0)).toString("utf8");
    expect(other).toMatch(
      /^<\?xml[^\n]*\n<otherdata xmlns="http:\/\/linux.duke.edu\/metadata\/other" packages="2">\n/,
    );
  });

  it("gives the same bytes for the same fragments, however they arrive", async () => {
    const names = Array.from({ length: 300 }, (_, i) => `pkg${String(i).padStart(3, "0")}`);
    const a = await buildSnapshot(fragmentsFor(names), { packages: names.length, revision: 7 });
    const b = await buildSnapshot(slowly(fragmentsFor(names)), {
      packages: names.length,
      revision: 7,
    });
    expect(b.repomd.equals(a.repomd)).toBe(true);
    expect(b.files.map((f) => f.bytes.toString("base64"))).toEqual(
      a.files.map((f) => f.bytes.toString("base64")),
    );
  });

  it('writes an empty repository with packages="0"', async () => {
    const snap = await buildSnapshot([], { packages: 0, revision: 0 });
    expect(gunzipSync(snap.files[1]?.bytes ?? Buffer.alloc(0)).toString("utf8")).toContain(
      'packages="0">\n</filelists>',
    );
  });

  it("fails when fewer fragments arrive than the count announced", async () => {
    const err = await buildSnapshot(fragmentsFor(["a"]), { packages: 2, revision: 0 }).catch(
      (e: unknown) => e,
    );
    expect(isReposyncError(err)).toBe(true);
  });
});

describe("SnapshotWriter", () => {
  const utf8 = (text: string) => Buffer.from(text, "utf8");

  it("writes buildSnapshot's bytes however the packages' XML is cut into blocks", async () => {
    const names = Array.from({ length: 300 }, (_, i) => `pkg${String(i).padStart(3, "0")}`);
    const fragments = fragmentsFor(names);
    const expected = await buildSnapshot(fragments, { packages: names.length, revision: 7 });
    // Blocks of 1, 2, 3 ... packages, as index batches of any size would be.
    const writer = new SnapshotWriter(names.length);
    for (let i = 0, size = 1; i < fragments.length; i += size, size++) {
      const block = fragments.slice(i, i + size);
      writer.add(block.length, {
        primary: utf8(block.map((f) => f.primary).join("")),
        filelists: utf8(block.map((f) => f.filelists).join("")),
        other: utf8(block.map((f) => f.other).join("")),
      });
    }
    const snap = await writer.finish(7);
    expect(snap.repomd.equals(expected.repomd)).toBe(true);
    expect(snap.files.map((f) => f.bytes.toString("base64"))).toEqual(
      expected.files.map((f) => f.bytes.toString("base64")),
    );
  });

  it("fails at the end when the packages added are not the count announced", async () => {
    const [fragment] = fragmentsFor(["a"]);
    const writer = new SnapshotWriter(2);
    writer.add(1, {
      primary: utf8(fragment?.primary ?? ""),
      filelists: utf8(fragment?.filelists ?? ""),
      other: utf8(fragment?.other ?? ""),
    });
    const err = await writer.finish(0).catch((e: unknown) => e);
    expect(isReposyncError(err) && err.code).toBe("CONFLICT");
  });
});
