import { execFile, execFileSync } from "node:child_process";
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI, ensureBuilt } from "../server/cli-process.js";
import { type IsolatedDnf, isolatedDnf } from "../support/dnf.js";
import { FIXTURE_RPMS_DIR, listFixtureRpms } from "../support/fixtures.js";
import { type StaticServer, startStaticServer } from "../support/static-server.js";
import { CORPUS_DIR, haveTools } from "../support/tools.js";

const run = promisify(execFile);

/** Packages dnf downloads in these tests: fx-noarch pulls in fx-files; fx-bighdr has a 600 KiB header. */
const DOWNLOADED = [
  "fx-noarch-2.5-3.noarch.rpm",
  "fx-files-1.0-1.x86_64.rpm",
  "fx-bighdr-1.0-1.x86_64.rpm",
];

type Dnf = IsolatedDnf;

async function ok(dnf: Dnf, ...args: string[]): Promise<string> {
  const res = await dnf(...args);
  if (res.code !== 0) {
    throw new Error(`dnf ${args.join(" ")} exited ${res.code}:\n${res.stderr}${res.stdout}`);
  }
  return res.stdout;
}

function lines(text: string): string[] {
  return text.split("\n").filter((l) => l !== "");
}

// Every field dnf exposes for a package from primary and filelists, one record per package.
const FIELDS = [
  "name",
  "epoch",
  "version",
  "release",
  "arch",
  "chksum",
  "downloadsize",
  "installsize",
  "size",
  "buildtime",
  "hdr_end",
  "location",
  "sourcerpm",
  "summary",
  "description",
  "license",
  "url",
  "vendor",
  "group",
  "packager",
  "provides",
  "requires",
  "conflicts",
  "obsoletes",
  "recommends",
  "suggests",
  "supplements",
  "enhances",
  "files",
];
const QF = `${FIELDS.map((f) => `<${f}>%{${f}}</${f}>`).join("\n")}\n@@end@@`;

async function allPackages(dnf: Dnf): Promise<string[]> {
  const out = await ok(dnf, "repoquery", "-a", "--arch=src,noarch,x86_64", `--qf=${QF}`);
  return out
    .split("@@end@@\n")
    .map((r) => r.trim())
    .filter((r) => r !== "")
    .sort();
}

describe.skipIf(!haveTools("dnf", "createrepo_c"))(
  "dnf reads the repodata `reposync index` writes",
  () => {
    let work: string;
    let ours: string;
    let reference: string;
    let tampered: string;
    let oursServer: StaticServer;
    let referenceServer: StaticServer;
    let tamperedServer: StaticServer;
    let dnf: Dnf;
    let dnfReference: Dnf;
    let indexRun: { code: number; stdout: string; stderr: string };

    beforeAll(async () => {
      ensureBuilt();
      work = mkdtempSync(path.join(tmpdir(), "reposync-e2e-dnf-"));
      ours = path.join(work, "ours");
      reference = path.join(work, "reference");
      tampered = path.join(work, "tampered");
      for (const dir of [ours, reference]) {
        cpSync(FIXTURE_RPMS_DIR, dir, { recursive: true });
        // Every corpus package: dnf 4.14 reads all twelve, signed, ISO-8859 and v6 ones included.
        for (const name of readdirSync(CORPUS_DIR).filter((n) => n.endsWith(".rpm"))) {
          copyFileSync(path.join(CORPUS_DIR, name), path.join(dir, name));
        }
      }
      indexRun = await run(process.execPath, [CLI, "index", ours], { cwd: work }).then(
        ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
        (err: { code?: number; stdout?: string; stderr?: string }) => ({
          code: err.code ?? -1,
          stdout: err.stdout ?? "",
          stderr: err.stderr ?? "",
        }),
      );
      if (indexRun.code !== 0) {
        throw new Error(
          `reposync index exited ${indexRun.code}:\n${indexRun.stderr}${indexRun.stdout}`,
        );
      }
      execFileSync("createrepo_c", ["--no-database", "--quiet", reference]);

      // Our repodata beside packages whose bytes differ from what the repodata promises.
      cpSync(ours, tampered, { recursive: true });
      for (const name of DOWNLOADED) {
        const file = path.join(tampered, name);
        const bytes = readFileSync(file);
        const last = bytes.length - 1;
        bytes[last] = (bytes[last] ?? 0) ^ 0xff;
        writeFileSync(file, bytes);
      }

      oursServer = await startStaticServer(ours);
      referenceServer = await startStaticServer(reference);
      tamperedServer = await startStaticServer(tampered);
      dnf = isolatedDnf(oursServer.url, path.join(work, "dnf-ours"));
      dnfReference = isolatedDnf(referenceServer.url, path.join(work, "dnf-reference"));
    });

    afterAll(async () => {
      await Promise.all([oursServer?.close(), referenceServer?.close(), tamperedServer?.close()]);
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it("writes repomd.xml and the three gzip'd files it names, nothing else, under DIR/repodata", () => {
      const files = readdirSync(path.join(ours, "repodata")).sort();
      expect(files).toContain("repomd.xml");
      const repomd = readFileSync(path.join(ours, "repodata", "repomd.xml"), "utf8");
      for (const type of ["primary", "filelists", "other"]) {
        const href = new RegExp(
          `<data type="${type}">[\\s\\S]*?<location href="repodata/([^"]+)"`,
        ).exec(repomd)?.[1];
        expect(href, `repomd.xml names a ${type} file`).toMatch(
          new RegExp(`^[0-9a-f]{64}-${type}\\.xml\\.gz$`),
        );
        expect(files).toContain(href);
      }
      expect(files).toHaveLength(4);
    });

    it("dnf makecache accepts the repodata and fetches repomd.xml and primary from it", async () => {
      await ok(dnf, "makecache");
      expect(oursServer.requestCount("/repodata/repomd.xml")).toBeGreaterThan(0);
      const primary = [...oursServer.requests.keys()].find((p) => p.endsWith("-primary.xml.gz"));
      expect(primary, "dnf asked for the primary file").toBeDefined();
    });

    it("dnf resolves fx-noarch's requires in the repo and downloads packages byte-identical to the originals", async () => {
      const dest = path.join(work, "downloaded");
      await ok(
        dnf,
        "install",
        "--downloadonly",
        "--setopt=install_weak_deps=False",
        `--destdir=${dest}`,
        "fx-noarch",
        "fx-bighdr",
      );
      expect(readdirSync(dest).sort()).toEqual([...DOWNLOADED].sort());
      for (const name of DOWNLOADED) {
        expect(
          readFileSync(path.join(dest, name)).equals(readFileSync(path.join(ours, name))),
          name,
        ).toBe(true);
        expect(oursServer.requestCount(`/${name}`), `GETs of ${name}`).toBeGreaterThan(0);
      }
    });

    it("dnf refuses packages whose bytes do not match the checksum in the repodata", async () => {
      const dnfTampered = isolatedDnf(tamperedServer.url, path.join(work, "dnf-tampered"));
      const dest = path.join(work, "downloaded-tampered");
      const res = await dnfTampered(
        "install",
        "--downloadonly",
        "--setopt=install_weak_deps=False",
        `--destdir=${dest}`,
        "fx-bighdr",
      );
      expect(res.code).not.toBe(0);
      expect(tamperedServer.requestCount("/fx-bighdr-1.0-1.x86_64.rpm")).toBeGreaterThan(0);
      const kept = existsSync(dest) ? readdirSync(dest) : [];
      expect(kept).not.toContain("fx-bighdr-1.0-1.x86_64.rpm");
    });

    it("dnf reports the epochs the specs declare: absent as 0, explicit 0, 1 and 3", async () => {
      const out = await ok(
        dnf,
        "repoquery",
        "--arch=noarch,x86_64",
        "--qf=%{name} %{epoch}",
        "fx-files",
        "fx-deps",
        "fx-noarch",
        "fx-changelog",
      );
      expect(lines(out).sort()).toEqual([
        "fx-changelog 3",
        "fx-deps 0",
        "fx-files 0",
        "fx-noarch 1",
      ]);
    });

    it("dnf reports fx-deps' requires as the spec declares them, filtered as createrepo_c filters them", async () => {
      const out = await ok(dnf, "repoquery", "--requires", "fx-deps.x86_64");
      expect(lines(out).sort()).toEqual(
        [
          "(fx-rich-a or fx-rich-b)",
          "(fx-rich-c if fx-rich-d)",
          // A self-shipped path outside the primary-file rule stays; /usr/bin/fx-deps-tool goes.
          "/usr/share/fx-deps/data.txt",
          // `fx-deps-api = 2.0` repeats an own provide and goes.
          "fx-deps-api >= 1.0",
          // Each duplicate pair keeps one entry.
          "fx-dup >= 1.0",
          "fx-dup-pre = 3.0",
          "fx-req-eq = 1.5-3",
          "fx-req-ge >= 1:1.0",
          "fx-req-gt > 0.9^git1",
          "fx-req-le <= 2:2.0-1",
          "fx-req-lt < 2.0",
          "fx-req-none",
          "fx-req-post",
          "fx-req-posttrans",
          "fx-req-pre",
          "fx-req-pretrans",
          "fx-req-preun",
          // The three libc.so.6 requires collapse into the highest.
          "libc.so.6(GLIBC_2.34)(64bit)",
        ].sort(),
      );
      const pre = await ok(dnf, "repoquery", "--requires-pre", "fx-deps.x86_64");
      expect(lines(pre).sort()).toEqual(["fx-dup-pre = 3.0", "fx-req-post", "fx-req-pre"]);
    });

    it("dnf reports the provides, conflicts and weak dependencies the specs declare", async () => {
      const provides = await ok(dnf, "repoquery", "--provides", "fx-deps.x86_64");
      expect(lines(provides).sort()).toEqual(
        [
          "/usr/bin/fx-deps-tool",
          "fx-deps = 1.0-1",
          "fx-deps(x86-64) = 1.0-1",
          "fx-deps-api = 2.0",
          "fx-deps-prov-eq = 2:1.0-1",
          "fx-deps-prov-ge >= 1.0",
          "fx-deps-prov-gt > 1.0~rc1",
          "fx-deps-prov-le <= 1.0-1",
          "fx-deps-prov-lt < 1.0",
          "fx-deps-prov-none",
        ].sort(),
      );
      const noarch = await ok(dnf, "repoquery", "--provides", "fx-noarch");
      expect(lines(noarch).sort()).toEqual(["fx-noarch = 1:2.5-3", "fx-noarch-feature = 1:2.5-3"]);
      const escaped = await ok(dnf, "repoquery", "--provides", "fx-escape");
      expect(lines(escaped).sort()).toEqual(
        [
          'fx-escape("q\'x")',
          "fx-escape = 0.1~beta^git2-1",
          "fx-escape(a&b)",
          "fx-escape(ünïcödé) = 1.0",
          "fx-escape(x86-64) = 0.1~beta^git2-1",
        ].sort(),
      );
      const conflicts = await ok(dnf, "repoquery", "--conflicts", "fx-deps.x86_64");
      expect(lines(conflicts).sort()).toEqual(
        [
          "fx-conf-eq = 1:1.0",
          "fx-conf-ge >= 3.0",
          "fx-conf-gt > 3.0-2",
          "fx-conf-le <= 1.0-1",
          "fx-conf-lt < 1.0",
          "fx-conf-none",
        ].sort(),
      );
      const supplements = await ok(dnf, "repoquery", "--supplements", "fx-deps.x86_64");
      expect(lines(supplements)).toContain("(fx-sup-rich-c and fx-sup-rich-d)");
      expect(lines(supplements)).toContain("fx-sup-le <= 1.0-1");
    });

    it("dnf shows fx-escape's summary with its markup characters and non-Latin text intact", async () => {
      const out = await ok(dnf, "repoquery", "--qf=%{summary}", "fx-escape");
      expect(out.trim()).toBe(
        `Tom & Jerry <cartoon> "quoted" 'single' — Ελληνικά, Русский, 日本語, العربية, हिन्दी`,
      );
    });

    it("every package reads the same through dnf as from createrepo_c's repodata for the same files", async () => {
      const [mine, theirs] = await Promise.all([allPackages(dnf), allPackages(dnfReference)]);
      expect(mine.length).toBe(
        listFixtureRpms().length + readdirSync(CORPUS_DIR).filter((n) => n.endsWith(".rpm")).length,
      );
      expect(mine).toEqual(theirs);
    });

    it("every changelog reads the same through dnf as from createrepo_c's repodata", async () => {
      const query = ["repoquery", "-a", "--arch=src,noarch,x86_64", "--changelogs"];
      const [mine, theirs] = await Promise.all([ok(dnf, ...query), ok(dnfReference, ...query)]);
      expect(mine).toContain("Zoë Ångström <zoe@example.invalid>");
      const blocks = (text: string) => text.split(/\n(?=Changelog for )/).sort();
      expect(blocks(mine)).toEqual(blocks(theirs));
    });
  },
);
