import { readFileSync, rmSync, statSync } from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEPENDENCY_KINDS, type RpmPackage } from "../../src/rpm/package.js";
import { parseRpmPrefix } from "../../src/rpm/parse-header.js";
import { readRpmFile } from "../../src/rpm/read-header.js";
import { haveTools } from "../support/tools.js";
import {
  type CreaterepoPackage,
  children,
  copyCorpus,
  corpusNames,
  createrepo,
  rpmFacts,
  text,
} from "./reference.js";

const none = (s: string) => (s === "(none)" ? "" : s);

describe.skipIf(!haveTools("rpm", "createrepo_c"))("the parser on the createrepo_c corpus", () => {
  let dir = "";
  let reference = new Map<string, CreaterepoPackage>();

  beforeAll(() => {
    dir = copyCorpus();
    reference = createrepo(dir);
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const parse = (name: string): RpmPackage => {
    const bytes = readFileSync(path.join(dir, name));
    const step = parseRpmPrefix(bytes);
    if (step.kind !== "package")
      throw new Error(`whole file still needs ${step.start}-${step.end}`);
    return step.pkg;
  };

  it("covers every corpus package", () => {
    expect(corpusNames().length).toBeGreaterThanOrEqual(12);
    expect([...reference.keys()].sort()).toEqual(corpusNames());
  });

  describe.each(corpusNames())("%s", (name) => {
    it("reads what rpm -qp reads", () => {
      const pkg = parse(name);
      const rpm = rpmFacts(path.join(dir, name));
      const t = rpm.tags;
      const isSource = t.SOURCEPACKAGE !== "(none)";
      expect(pkg.name).toBe(t.NAME);
      expect(pkg.epoch).toBe(t.EPOCH === "(none)" ? null : Number(t.EPOCH));
      expect([pkg.version, pkg.release]).toEqual([t.VERSION, t.RELEASE]);
      expect(pkg.isSource).toBe(isSource);
      expect(pkg.arch).toBe(isSource ? "src" : t.ARCH);
      expect(pkg.sourceRpm).toBe(isSource ? "" : none(t.SOURCERPM));
      expect({
        summary: pkg.summary,
        description: pkg.description,
        license: pkg.license,
        vendor: pkg.vendor,
        group: pkg.group,
        url: pkg.url,
        packager: pkg.packager,
        buildHost: pkg.buildHost,
      }).toEqual({
        summary: none(t.SUMMARY),
        description: none(t.DESCRIPTION),
        license: none(t.LICENSE),
        vendor: none(t.VENDOR),
        group: none(t.GROUP),
        url: none(t.URL),
        packager: none(t.PACKAGER),
        buildHost: none(t.BUILDHOST),
      });
      expect(pkg.buildTime).toBe(Number(t.BUILDTIME));
      expect(pkg.installedSize).toBe(Number(t.LONGSIZE));
      expect(pkg.installedSize).toBe(Number(t.SIZE));
      expect(pkg.archiveSize).toBe(Number(t.LONGARCHIVESIZE));
      expect(pkg.fileSize).toBe(pkg.headerStart + Number(t.LONGSIGSIZE));

      for (const kind of DEPENDENCY_KINDS) {
        expect(
          pkg.dependencies[kind].map((d) => [d.name, String(d.flags), d.version]),
          kind,
        ).toEqual(rpm.dependencies[kind]);
      }
      expect(pkg.files.map((f) => f.path)).toEqual(rpm.files.map(([p]) => p));
      expect(pkg.changelog.map((c) => [String(c.date), c.author, c.text])).toEqual(rpm.changelog);
    });

    it("agrees with createrepo_c's repodata", () => {
      const pkg = parse(name);
      const ref = reference.get(name);
      expect(ref).toBeDefined();
      const p = ref!.primary;
      const format = children(p, "format")[0];
      const attrs = (el: string, parent = p) => children(parent, el)[0]?._attributes ?? {};
      expect(text(p, "name")).toBe(pkg.name);
      expect(text(p, "arch")).toBe(pkg.arch);
      expect(attrs("version")).toEqual({
        epoch: String(pkg.epoch ?? 0),
        ver: pkg.version,
        rel: pkg.release,
      });
      for (const [el, value] of [
        ["summary", pkg.summary],
        ["description", pkg.description],
        ["packager", pkg.packager],
        ["url", pkg.url],
      ] as const) {
        expect(text(p, el), el).toBe(value);
      }
      for (const [el, value] of [
        ["rpm:license", pkg.license],
        ["rpm:vendor", pkg.vendor],
        ["rpm:group", pkg.group],
        ["rpm:buildhost", pkg.buildHost],
        ["rpm:sourcerpm", pkg.sourceRpm],
      ] as const) {
        expect(text(format, el), el).toBe(value);
      }
      expect(attrs("time").build).toBe(String(pkg.buildTime));
      expect(attrs("size")).toEqual({
        package: String(pkg.fileSize),
        installed: String(pkg.installedSize),
        archive: String(pkg.archiveSize),
      });
      expect(pkg.fileSize).toBe(statSync(path.join(dir, name)).size);
      expect(attrs("rpm:header-range", format)).toEqual({
        start: String(pkg.headerStart),
        end: String(pkg.headerEnd),
      });

      // filelists.xml lists every file with its type: dir (wins over ghost), ghost, or plain.
      const listed = children(ref!.filelists, "file").map((f) => ({
        path: f._text ?? "",
        type: f._attributes?.type ?? "file",
      }));
      expect(pkg.files).toEqual(listed);

      // other.xml: the newest 10 entries, oldest first, authors without trailing spaces.
      const logged = children(ref!.other, "changelog").map((c) => ({
        author: c._attributes?.author ?? "",
        date: Number(c._attributes?.date),
        text: c._text ?? "",
      }));
      // createrepo_c makes equal timestamps distinct by adding 1, 2, ... to the later ones.
      let previous = Number.NaN;
      let bump = 0;
      const expected = pkg.changelog
        .slice(0, 10)
        .reverse()
        .map((c) => {
          bump = c.date === previous ? bump + 1 : 0;
          previous = c.date;
          return { author: c.author.trimEnd(), date: c.date + bump, text: c.text };
        });
      expect(expected).toEqual(logged);
    });

    it("reads the same package from disk with readRpmFile", async () => {
      await expect(readRpmFile(path.join(dir, name))).resolves.toEqual(parse(name));
    });
  });
});
