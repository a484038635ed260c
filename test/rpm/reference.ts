import { execFileSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { gunzipSync } from "node:zlib";
import { xml2js } from "xml-js";
import { decodeHeaderText } from "../../src/rpm/decode-text.js";
import { CORPUS_DIR } from "../support/tools.js";

/** Reference answers from the real tools (rpm, createrepo_c) for the RPM parser's tests. */

const FS = "\x1f";
const RS = "\x1e";

/** The corpus packages' file names (read-only folder: tests work on copies). */
export function corpusNames(): string[] {
  return readdirSync(CORPUS_DIR)
    .filter((n) => n.endsWith(".rpm"))
    .sort();
}

/** A fresh temporary folder holding copies of the corpus packages. */
export function copyCorpus(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "reposync-rpm-"));
  for (const name of corpusNames()) {
    copyFileSync(path.join(CORPUS_DIR, name), path.join(dir, name));
  }
  return dir;
}

/** `rpm -qp --qf FORMAT file`, raw bytes. */
function rpmQuery(file: string, format: string): Buffer {
  return execFileSync("rpm", ["-qp", "--nosignature", "--nodigest", "--qf", format, file], {
    stdio: ["ignore", "pipe", "ignore"],
  });
}

/** Splits rpm's output into records and fields, each field decoded as a header string. */
function records(out: Buffer): string[][] {
  const rows: string[][] = [];
  let start = 0;
  for (;;) {
    const end = out.indexOf(RS, start);
    if (end < 0) break;
    const row: string[] = [];
    let f = start;
    for (;;) {
      const sep = out.indexOf(FS, f);
      if (sep < 0 || sep > end) {
        row.push(decodeHeaderText(out.subarray(f, end)));
        break;
      }
      row.push(decodeHeaderText(out.subarray(f, sep)));
      f = sep + 1;
    }
    rows.push(row);
    start = end + 1;
  }
  return rows;
}

export const SCALAR_TAGS = [
  "NAME",
  "EPOCH",
  "VERSION",
  "RELEASE",
  "ARCH",
  "SUMMARY",
  "DESCRIPTION",
  "LICENSE",
  "VENDOR",
  "GROUP",
  "URL",
  "PACKAGER",
  "BUILDHOST",
  "BUILDTIME",
  "SOURCERPM",
  "SOURCEPACKAGE",
  "SIZE",
  "LONGSIZE",
  "LONGSIGSIZE",
  "LONGARCHIVESIZE",
] as const;

/** What rpm says of one package: scalar tags ("(none)" when absent), arrays as rows. */
export function rpmFacts(file: string) {
  const [scalars] = records(rpmQuery(file, `${SCALAR_TAGS.map((t) => `%{${t}}`).join(FS)}${RS}`));
  const tags = Object.fromEntries(SCALAR_TAGS.map((t, i) => [t, scalars?.[i] ?? ""])) as Record<
    (typeof SCALAR_TAGS)[number],
    string
  >;
  const deps = (prefix: string) =>
    records(
      rpmQuery(file, `[%{${prefix}NAME}${FS}%{${prefix}FLAGS}${FS}%{${prefix}VERSION}${RS}]`),
    );
  return {
    tags,
    dependencies: {
      provides: deps("PROVIDE"),
      requires: deps("REQUIRE"),
      conflicts: deps("CONFLICT"),
      obsoletes: deps("OBSOLETE"),
      suggests: deps("SUGGEST"),
      enhances: deps("ENHANCE"),
      recommends: deps("RECOMMEND"),
      supplements: deps("SUPPLEMENT"),
    },
    files: records(rpmQuery(file, `[%{FILENAMES}${FS}%{FILEFLAGS}${FS}%{FILEMODES}${RS}]`)),
    changelog: records(
      rpmQuery(file, `[%{CHANGELOGTIME}${FS}%{CHANGELOGNAME}${FS}%{CHANGELOGTEXT}${RS}]`),
    ),
  };
}

type XmlNode = { [key: string]: XmlNode | XmlNode[] | string | Record<string, string> };

/** A parsed XML element in xml-js compact form. */
export interface XmlElement {
  _attributes?: Record<string, string>;
  _text?: string;
  [child: string]: unknown;
}

/** The child elements named `name`, always as an array. */
export function children(el: XmlElement | undefined, name: string): XmlElement[] {
  const c = el?.[name];
  if (c === undefined) return [];
  return (Array.isArray(c) ? c : [c]) as XmlElement[];
}

/** Text of the first child named `name`; "" for an empty element. */
export function text(el: XmlElement | undefined, name: string): string {
  return children(el, name)[0]?._text ?? "";
}

/** One package's records from createrepo_c's three files. */
export interface CreaterepoPackage {
  primary: XmlElement;
  filelists: XmlElement;
  other: XmlElement;
}

/** Runs `createrepo_c --no-database dir` and returns its records by location href. */
export function createrepo(dir: string): Map<string, CreaterepoPackage> {
  execFileSync("createrepo_c", ["--no-database", dir], { stdio: "ignore" });
  const repodata = path.join(dir, "repodata");
  const load = (kind: string, root: string): XmlElement[] => {
    const file = readdirSync(repodata).find((n) => n.endsWith(`-${kind}.xml.gz`));
    if (file === undefined) throw new Error(`createrepo_c wrote no ${kind}`);
    const xml = gunzipSync(readFileSync(path.join(repodata, file))).toString("utf8");
    const doc = xml2js(xml, { compact: true }) as XmlNode;
    return children(doc[root] as XmlElement, "package");
  };
  const primary = load("primary", "metadata");
  const filelists = load("filelists", "filelists");
  const other = load("other", "otherdata");
  const byId = (list: XmlElement[]) => new Map(list.map((p) => [p._attributes?.pkgid ?? "", p]));
  const files = byId(filelists);
  const others = byId(other);
  const out = new Map<string, CreaterepoPackage>();
  for (const p of primary) {
    const href = children(p, "location")[0]?._attributes?.href ?? "";
    const id = children(p, "checksum")[0]?._text ?? "";
    out.set(href, {
      primary: p,
      filelists: files.get(id) ?? {},
      other: others.get(id) ?? {},
    });
  }
  return out;
}
