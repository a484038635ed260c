import { ReposyncError } from "../errors.js";
import type { HeaderBlob } from "./header-blob.js";
import type {
  ChangelogEntry,
  Dependency,
  DependencyKind,
  PackageFile,
  RpmPackage,
} from "./package.js";
import { SIG_TAG, TAG } from "./tags.js";

/** Where the two headers sit in the file, and what the lead said. */
export interface HeaderLayout {
  readonly headerStart: number;
  readonly headerEnd: number;
  /** Lead type: 0 binary, 1 source. */
  readonly leadType: number;
  /** The file's size when the caller knows it; used only when the header states none. */
  readonly knownFileSize: number | undefined;
}

/** RPMSENSE_STRONG: a legacy weak dependency with this bit is the strong kind. */
const SENSE_STRONG = 1 << 27;
const FILE_GHOST = 0x40;
const MODE_TYPE_MASK = 0xf000;
const MODE_DIR = 0x4000;

/** [kind, name tag, flags tag, version tag] for the current weak/strong dependency tags. */
const DEPENDENCY_TAGS: ReadonlyArray<readonly [DependencyKind, number, number, number]> = [
  ["provides", TAG.PROVIDENAME, TAG.PROVIDEFLAGS, TAG.PROVIDEVERSION],
  ["requires", TAG.REQUIRENAME, TAG.REQUIREFLAGS, TAG.REQUIREVERSION],
  ["conflicts", TAG.CONFLICTNAME, TAG.CONFLICTFLAGS, TAG.CONFLICTVERSION],
  ["obsoletes", TAG.OBSOLETENAME, TAG.OBSOLETEFLAGS, TAG.OBSOLETEVERSION],
  ["suggests", TAG.SUGGESTNAME, TAG.SUGGESTFLAGS, TAG.SUGGESTVERSION],
  ["enhances", TAG.ENHANCENAME, TAG.ENHANCEFLAGS, TAG.ENHANCEVERSION],
  ["recommends", TAG.RECOMMENDNAME, TAG.RECOMMENDFLAGS, TAG.RECOMMENDVERSION],
  ["supplements", TAG.SUPPLEMENTNAME, TAG.SUPPLEMENTFLAGS, TAG.SUPPLEMENTVERSION],
];

/**
 * rpm < 4.12 stored all weak dependencies in two tag triples and told the strong ones apart by a
 * flag bit. Like createrepo_c, their entries follow the current tags' entries of the same kind.
 */
const LEGACY_DEPENDENCY_TAGS: ReadonlyArray<
  readonly [weak: DependencyKind, strong: DependencyKind, number, number, number]
> = [
  ["suggests", "recommends", TAG.OLDSUGGESTSNAME, TAG.OLDSUGGESTSFLAGS, TAG.OLDSUGGESTSVERSION],
  ["enhances", "supplements", TAG.OLDENHANCESNAME, TAG.OLDENHANCESFLAGS, TAG.OLDENHANCESVERSION],
];

function badHeader(message: string): never {
  throw new ReposyncError("RPM_BAD_HEADER", `main header: ${message}`);
}

/** A parallel array must have one element per name when present; absent means all zero/empty. */
function parallel<T>(values: T[] | undefined, length: number, what: string, empty: T): T[] {
  if (values === undefined) return new Array<T>(length).fill(empty);
  if (values.length !== length)
    badHeader(`${what} has ${values.length} elements, expected ${length}`);
  return values;
}

function requireString(main: HeaderBlob, tag: number, name: string): string {
  const value = main.string(tag);
  if (value === undefined) {
    throw new ReposyncError("RPM_MISSING_TAG", `main header has no ${name} (tag ${tag})`);
  }
  return value;
}

function readDependencies(main: HeaderBlob): Record<DependencyKind, Dependency[]> {
  const deps: Record<DependencyKind, Dependency[]> = {
    provides: [],
    requires: [],
    conflicts: [],
    obsoletes: [],
    suggests: [],
    enhances: [],
    recommends: [],
    supplements: [],
  };
  const read = (
    nameTag: number,
    flagsTag: number,
    versionTag: number,
    add: (d: Dependency) => void,
  ) => {
    const names = main.strings(nameTag);
    if (names === undefined) return;
    const flags = parallel(main.numbers(flagsTag), names.length, `tag ${flagsTag}`, 0);
    const versions = parallel(main.strings(versionTag), names.length, `tag ${versionTag}`, "");
    for (let i = 0; i < names.length; i++) {
      add({ name: names[i]!, flags: flags[i]!, version: versions[i]! });
    }
  };
  for (const [kind, n, f, v] of DEPENDENCY_TAGS) read(n, f, v, (d) => deps[kind].push(d));
  for (const [weak, strong, n, f, v] of LEGACY_DEPENDENCY_TAGS) {
    read(n, f, v, (d) => deps[d.flags & SENSE_STRONG ? strong : weak].push(d));
  }
  return deps;
}

function readPaths(main: HeaderBlob): string[] {
  const basenames = main.strings(TAG.BASENAMES);
  if (basenames === undefined) return main.strings(TAG.OLDFILENAMES) ?? [];
  const dirnames = main.strings(TAG.DIRNAMES) ?? badHeader("BASENAMES without DIRNAMES");
  const indexes = parallel(main.numbers(TAG.DIRINDEXES), basenames.length, "DIRINDEXES", -1);
  return basenames.map((base, i) => {
    const dir = dirnames[indexes[i]!];
    if (dir === undefined) badHeader(`file ${i} has directory index ${indexes[i]} out of range`);
    return dir + base;
  });
}

function readFiles(main: HeaderBlob): PackageFile[] {
  const paths = readPaths(main);
  const modes = parallel(main.numbers(TAG.FILEMODES), paths.length, "FILEMODES", 0);
  const flags = parallel(main.numbers(TAG.FILEFLAGS), paths.length, "FILEFLAGS", 0);
  return paths.map((path, i) => ({
    path,
    // A directory stays a directory even when marked %ghost, as createrepo_c writes it.
    type:
      (modes[i]! & MODE_TYPE_MASK) === MODE_DIR ? "dir" : flags[i]! & FILE_GHOST ? "ghost" : "file",
  }));
}

function readChangelog(main: HeaderBlob): ChangelogEntry[] {
  const times = main.numbers(TAG.CHANGELOGTIME) ?? [];
  const names = parallel(main.strings(TAG.CHANGELOGNAME), times.length, "CHANGELOGNAME", "");
  const texts = parallel(main.strings(TAG.CHANGELOGTEXT), times.length, "CHANGELOGTEXT", "");
  return times.map((date, i) => ({ author: names[i]!, date, text: texts[i]! }));
}

/**
 * The file's size. The signature's SIZE counts header + payload, so the file is hstart + SIZE
 * (LONGSIZE past 4 GiB). rpm 6 ("v6") packages allow no signature tags above 999 and record the
 * compressed payload's size in the main header (PAYLOADSIZE 5112; PAYLOADSIZEALT 5113 is the
 * uncompressed one), and the payload runs from hend to the end of the file.
 */
function fileSizeOf(sig: HeaderBlob, main: HeaderBlob, layout: HeaderLayout): number {
  const sigSize = sig.number(SIG_TAG.LONGSIZE) ?? sig.number(SIG_TAG.SIZE);
  if (sigSize !== undefined) return layout.headerStart + sigSize;
  const payload = main.number(TAG.PAYLOADSIZE);
  if (payload !== undefined) return layout.headerEnd + payload;
  if (layout.knownFileSize !== undefined) return layout.knownFileSize;
  throw new ReposyncError(
    "RPM_MISSING_TAG",
    "neither the signature (SIZE, LONGSIZE) nor the main header (PAYLOADSIZE) states the file size",
  );
}

/** Builds the package model from the two checked headers. */
export function packageFromHeaders(
  sig: HeaderBlob,
  main: HeaderBlob,
  layout: HeaderLayout,
): RpmPackage {
  const name = requireString(main, TAG.NAME, "NAME");
  const version = requireString(main, TAG.VERSION, "VERSION");
  const release = requireString(main, TAG.RELEASE, "RELEASE");
  // rpm marks source packages with SOURCEPACKAGE; very old ones only by the lead's type and
  // the absence of SOURCERPM (rpm's own headerIsSource test).
  const isSource =
    main.has(TAG.SOURCEPACKAGE) || (layout.leadType === 1 && !main.has(TAG.SOURCERPM));
  const text = (tag: number) => main.string(tag) ?? "";
  return {
    name,
    epoch: main.number(TAG.EPOCH) ?? null,
    version,
    release,
    arch: isSource ? "src" : text(TAG.ARCH),
    isSource,
    summary: text(TAG.SUMMARY),
    description: text(TAG.DESCRIPTION),
    packager: text(TAG.PACKAGER),
    url: text(TAG.URL),
    license: text(TAG.LICENSE),
    vendor: text(TAG.VENDOR),
    group: text(TAG.GROUP),
    buildHost: text(TAG.BUILDHOST),
    sourceRpm: isSource ? "" : text(TAG.SOURCERPM),
    buildTime: main.number(TAG.BUILDTIME) ?? 0,
    headerStart: layout.headerStart,
    headerEnd: layout.headerEnd,
    fileSize: fileSizeOf(sig, main, layout),
    installedSize: main.number(TAG.LONGSIZE) ?? main.number(TAG.SIZE) ?? 0,
    archiveSize:
      sig.number(SIG_TAG.LONGARCHIVESIZE) ??
      sig.number(SIG_TAG.PAYLOADSIZE) ??
      main.number(TAG.PAYLOADSIZEALT) ??
      main.number(TAG.ARCHIVESIZE) ??
      0,
    dependencies: readDependencies(main),
    files: readFiles(main),
    changelog: readChangelog(main),
  };
}
