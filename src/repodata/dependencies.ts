import type { Dependency, DependencyKind, RpmPackage } from "../rpm/package.js";
import { isPrimaryFile } from "./primary-file.js";
import { rpmVersionCompare } from "./rpm-version-compare.js";

/**
 * The dependency lists primary.xml shows for a package, derived from the header's raw lists the way
 * createrepo_c 0.17.3 does it. Each rule below was checked against its output on real (and
 * byte-patched) packages; the tests name them one by one.
 */

/** One `<rpm:entry>`: attributes already resolved; absent ones are not written. */
export interface RepoDependency {
  readonly name: string;
  readonly flags: RelationFlag | null;
  readonly epoch: string | null;
  readonly ver: string | null;
  readonly rel: string | null;
  /** Only ever true in requires. */
  readonly pre: boolean;
}

export type RelationFlag = "LT" | "GT" | "EQ" | "LE" | "GE";

const PREREQ = 1 << 6;
const SCRIPT_PRE = 1 << 9;
const SCRIPT_POST = 1 << 10;
const MISSINGOK = 1 << 19;
/**
 * createrepo_c before 1.1.1 (the 0.17.3 we conform to) marks pre="1" only for these; PRETRANS and
 * POSTTRANS requires come out without it.
 */
const PRE_BITS = PREREQ | SCRIPT_PRE | SCRIPT_POST;

/** `flags & 0xF` as primary.xml names it; null for no or a meaningless comparison. */
export function relationFlag(flags: number): RelationFlag | null {
  switch (flags & 0xf) {
    case 2:
      return "LT";
    case 4:
      return "GT";
    case 8:
      return "EQ";
    case 10:
      return "LE";
    case 12:
      return "GE";
    default:
      return null;
  }
}

/** Whether `text` is digits only (or empty): a char loop, cheaper than a regex per entry. */
function isDigits(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

/** "E:V-R" split into its parts; null when the epoch is not a number (createrepo_c drops those). */
export function splitVersion(version: string): { epoch: string; ver: string; rel: string } | null {
  let rest = version;
  let epoch = "0";
  const colon = version.indexOf(":");
  if (colon >= 0) {
    const digits = version.slice(0, colon);
    if (!isDigits(digits)) return null;
    if (digits !== "") epoch = digits;
    rest = version.slice(colon + 1);
  }
  const dash = rest.indexOf("-");
  return dash < 0
    ? { epoch, ver: rest, rel: "" }
    : { epoch, ver: rest.slice(0, dash), rel: rest.slice(dash + 1) };
}

/** Resolves one header dependency into its entry attributes; null when createrepo_c would skip it. */
function toEntry(
  dep: Dependency,
  pre: boolean,
  flags: RelationFlag | null = relationFlag(dep.flags),
): RepoDependency | null {
  if (flags === null)
    return { name: dep.name, flags: null, epoch: null, ver: null, rel: null, pre };
  if (dep.version === "") return { name: dep.name, flags, epoch: null, ver: null, rel: null, pre };
  const evr = splitVersion(dep.version);
  if (evr === null) return null;
  return {
    name: dep.name,
    flags,
    epoch: evr.epoch,
    ver: evr.ver || null,
    rel: evr.rel || null,
    pre,
  };
}

/**
 * The identity createrepo_c uses to match a require against a provide: name, flag name and full
 * version string run together, or the name alone when the flags name no comparison.
 */
function provideKey(dep: Dependency, flags: RelationFlag | null = relationFlag(dep.flags)): string {
  return flags === null ? dep.name : `${dep.name}${flags}${dep.version}`;
}

/** What the duplicate check compares a require with: the last kept one of its name. */
interface KeptRequire {
  readonly flags: RelationFlag | null;
  readonly version: string;
  readonly pre: boolean;
}

/**
 * Orders `libc.so.6(...)` names by the version inside their first parentheses (GLIBC_2.14 >
 * GLIBC_2.3.4 > GLIBC_2.2.5 > `()`); a name without a version loses to one with.
 */
export function compareLibcRequire(a: string, b: string): number {
  const versionOf = (name: string): string | null => {
    const open = name.indexOf("(");
    if (open < 0) return null;
    const close = name.indexOf(")", open);
    if (close < 0) return null;
    const inside = name.slice(open, close);
    const digit = inside.search(/[0-9]/);
    return digit < 0 ? null : inside.slice(digit);
  };
  const va = versionOf(a);
  const vb = versionOf(b);
  if (va === null || vb === null) return va === vb ? 0 : va === null ? -1 : 1;
  return rpmVersionCompare(va, vb);
}

/**
 * Filters the requires, in this order (first match wins): drop `rpmlib(...)`; drop a path the
 * package ships as a primary file; drop one identical to one of its own provides; compute pre;
 * drop one equal (flags, version, pre) to the last require of that name that was kept; send a
 * MISSINGOK one to recommends (ahead of the header's recommends); collapse every `libc.so.6*` into
 * the highest, written last. Skipped MISSINGOK and libc entries do not count as "kept".
 */
function filterRequires(pkg: RpmPackage): {
  requires: RepoDependency[];
  recommends: RepoDependency[];
} {
  const requires: RepoDependency[] = [];
  const recommends: RepoDependency[] = [];
  if (pkg.dependencies.requires.length === 0) return { requires, recommends };
  // Built only when a require names a primary path: most packages never need it.
  let ownFiles: Set<string> | null = null;
  const shipsPrimaryFile = (path: string): boolean => {
    if (!path.startsWith("/") || !isPrimaryFile(path)) return false;
    ownFiles ??= new Set(pkg.files.map((f) => f.path));
    return ownFiles.has(path);
  };
  const provided = new Set<string>();
  for (const dep of pkg.dependencies.provides) provided.add(provideKey(dep));
  const lastKept = new Map<string, KeptRequire>();
  let libc: RepoDependency | null = null;

  for (const dep of pkg.dependencies.requires) {
    if (dep.name.startsWith("rpmlib(")) continue;
    if (shipsPrimaryFile(dep.name)) continue;
    const flags = relationFlag(dep.flags);
    if (provided.has(provideKey(dep, flags))) continue;
    const pre = (dep.flags & PRE_BITS) !== 0;
    const previous = lastKept.get(dep.name);
    if (
      previous !== undefined &&
      previous.flags === flags &&
      previous.version === dep.version &&
      previous.pre === pre
    ) {
      continue;
    }
    if ((dep.flags & MISSINGOK) !== 0) {
      // Weak dependencies carry no pre attribute.
      const entry = toEntry(dep, false, flags);
      if (entry !== null) recommends.push(entry);
      continue;
    }
    const entry = toEntry(dep, pre, flags);
    if (entry === null) continue;
    if (dep.name.startsWith("libc.so.6")) {
      if (libc === null || compareLibcRequire(libc.name, dep.name) < 0) libc = entry;
      continue;
    }
    requires.push(entry);
    lastKept.set(dep.name, { flags, version: dep.version, pre });
  }
  if (libc !== null) requires.push(libc);
  return { requires, recommends };
}

/** The entries of one unfiltered section, less those createrepo_c skips. */
function entriesOf(deps: readonly Dependency[]): RepoDependency[] {
  const out: RepoDependency[] = [];
  for (const dep of deps) {
    const entry = toEntry(dep, false);
    if (entry !== null) out.push(entry);
  }
  return out;
}

/** Every dependency section of primary.xml for `pkg`, in createrepo_c's order and filtering. */
export function repoDependencies(pkg: RpmPackage): Record<DependencyKind, RepoDependency[]> {
  const deps = pkg.dependencies;
  const { requires, recommends } = filterRequires(pkg);
  const headerRecommends = entriesOf(deps.recommends);
  return {
    provides: entriesOf(deps.provides),
    requires,
    conflicts: entriesOf(deps.conflicts),
    obsoletes: entriesOf(deps.obsoletes),
    suggests: entriesOf(deps.suggests),
    enhances: entriesOf(deps.enhances),
    recommends: recommends.length === 0 ? headerRecommends : recommends.concat(headerRecommends),
    supplements: entriesOf(deps.supplements),
  };
}
