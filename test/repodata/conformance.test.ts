import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cp, mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Element, xml2js } from "xml-js";
import { indexDirectory } from "../../src/repodata/index-directory.js";
import { CORPUS_DIR, haveTools, REPO_ROOT } from "../support/tools.js";

/**
 * The reference: createrepo_c --no-database on a copy of the corpus and the fixture RPMs, against
 * indexDirectory on another copy with the same mtimes. Both outputs are parsed and compared
 * package by package, every element and attribute, in primary, filelists and other. Parsing
 * decodes character references, which is the one difference rpm-repodata.md allows (libxml2
 * versions write non-ASCII in attributes differently).
 */

const FIXTURE_RPMS = join(REPO_ROOT, "fixtures", "rpms");
const TYPES = ["primary", "filelists", "other"] as const;
const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

function parse(xml: string): Element {
  return xml2js(xml, { compact: false, captureSpacesBetweenElements: false }) as Element;
}

function children(el: Element | undefined, name?: string): Element[] {
  return (el?.elements ?? []).filter(
    (e) => e.type === "element" && (name === undefined || e.name === name),
  );
}

function dataFiles(repomd: Element): Map<string, { href: string; fields: Record<string, string> }> {
  const out = new Map<string, { href: string; fields: Record<string, string> }>();
  for (const data of children(children(repomd, "repomd")[0], "data")) {
    const fields: Record<string, string> = {};
    let href = "";
    for (const child of children(data)) {
      if (child.name === "location") href = String(child.attributes?.href);
      else
        fields[child.name ?? ""] = String(
          children(child)[0]?.text ?? child.elements?.[0]?.text ?? "",
        );
    }
    out.set(String(data.attributes?.type), { href, fields });
  }
  return out;
}

async function readRepodata(
  dir: string,
): Promise<{ repomd: Element; open: Record<string, string> }> {
  const repomd = parse(await readFile(join(dir, "repodata", "repomd.xml"), "utf8"));
  const open: Record<string, string> = {};
  for (const [type, { href }] of dataFiles(repomd)) {
    open[type] = gunzipSync(await readFile(join(dir, href))).toString("utf8");
  }
  return { repomd, open };
}

async function copyPackages(into: string): Promise<void> {
  await mkdir(join(into, "fixtures"), { recursive: true });
  // cp keeps mtimes, so `time file` matches between the two copies.
  await cp(CORPUS_DIR, into, { recursive: true, preserveTimestamps: true });
  await cp(FIXTURE_RPMS, join(into, "fixtures"), { recursive: true, preserveTimestamps: true });
}

describe.skipIf(!haveTools("createrepo_c"))("index DIR against createrepo_c", () => {
  let root: string;
  let ours: { repomd: Element; open: Record<string, string> };
  let theirs: { repomd: Element; open: Record<string, string> };
  let oursDir: string;
  let packageFiles: number;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "reposync-conformance-"));
    const refDir = join(root, "ref");
    oursDir = join(root, "ours");
    await copyPackages(refDir);
    await copyPackages(oursDir);
    packageFiles = (await readdir(CORPUS_DIR)).filter((n) => n.endsWith(".rpm")).length;
    packageFiles += (await readdir(FIXTURE_RPMS)).filter((n) => n.endsWith(".rpm")).length;
    execFileSync("createrepo_c", ["--no-database", "--quiet", refDir], { stdio: "pipe" });
    const skipped: string[] = [];
    await indexDirectory(oursDir, {
      changelogLimit: 10,
      onSkip: (f, r) => skipped.push(`${f}: ${r}`),
    });
    expect(skipped).toEqual([]);
    theirs = await readRepodata(refDir);
    ours = await readRepodata(oursDir);
  });

  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  it("covers the corpus and the fixture packages (in a subfolder)", () => {
    const primary = children(parse(ours.open.primary ?? ""), "metadata")[0];
    expect(children(primary, "package")).toHaveLength(packageFiles);
    expect(ours.open.primary).toContain('<location href="fixtures/');
    expect(packageFiles).toBeGreaterThan(12);
  });

  for (const type of TYPES) {
    it(`matches createrepo_c's ${type}.xml package by package, field by field`, () => {
      const mine = children(parse(ours.open[type] ?? ""))[0];
      const ref = children(parse(theirs.open[type] ?? ""))[0];
      expect(mine?.name).toBe(ref?.name);
      expect(mine?.attributes).toEqual(ref?.attributes);
      const minePackages = children(mine, "package");
      const refPackages = children(ref, "package");
      expect(minePackages.length).toBe(refPackages.length);
      refPackages.forEach((refPackage, i) => {
        // The package's own identity first, so a failure names the package that differs.
        const label = JSON.stringify(
          refPackage.attributes ?? children(refPackage, "location")[0]?.attributes,
        );
        expect({ label, pkg: minePackages[i] }).toEqual({ label, pkg: refPackage });
      });
    });
  }

  it("states checksums, sizes, open checksums and open sizes that match the files written", async () => {
    const data = dataFiles(ours.repomd);
    expect([...data.keys()]).toEqual([...TYPES]);
    const names = new Set(["repomd.xml"]);
    for (const [type, { href, fields }] of data) {
      const bytes = await readFile(join(oursDir, href));
      const open = gunzipSync(bytes);
      expect(href).toBe(`repodata/${sha256(bytes)}-${type}.xml.gz`);
      expect(fields.checksum).toBe(sha256(bytes));
      expect(Number(fields.size)).toBe(bytes.length);
      expect(fields["open-checksum"]).toBe(sha256(open));
      expect(Number(fields["open-size"])).toBe(open.length);
      names.add(href.slice("repodata/".length));
    }
    expect(new Set(await readdir(join(oursDir, "repodata")))).toEqual(names);
  });

  it("uses the newest package's mtime as revision and timestamps, never the clock", () => {
    const times = [...(ours.open.primary ?? "").matchAll(/<time file="(\d+)"/g)].map((m) =>
      Number(m[1]),
    );
    const newest = String(Math.max(...times));
    const revision = children(children(ours.repomd, "repomd")[0], "revision")[0]?.elements?.[0]
      ?.text;
    expect(String(revision)).toBe(newest);
    for (const { fields } of dataFiles(ours.repomd).values()) expect(fields.timestamp).toBe(newest);
  });
});
