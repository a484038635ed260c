import {
  DEPENDENCY_KINDS,
  type Dependency,
  type DependencyKind,
  type RpmPackage,
} from "../rpm/package.js";
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

const RELATION_FLAGS: Readonly<Record<number, RelationFlag>> = {
  2: "LT",
  4: "GT",
  8: "EQ",
  10: "LE",
  12: "GE",
};

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
  return RELATION_FLAGS[flags & 0xf] ?? null;
}

/** "E:V-R" split into its parts; null when the epoch is not a number (createrepo_c drops those). */
export function splitVersion(version: string): { epoch: string; ver: string; rel: string } | null {
  let rest = version;
  let epoch = "0";
  const colon = version.indexOf(":");
  if (colon >= 0) {
    const digits = version.slice(0, colon);
    if (!/^[0-9]*$/.test(digits)) return null;
    if (digits !== "") epoch = digits;
    rest = version.slice(colon + 1);
  }
  const dash = rest.indexOf("-");
  return dash < 0
    ? { epoch, ver: rest, rel: "" }
    : { epoch, ver: rest.slice(0, dash), rel: rest.slice(dash + 1) };
}

/** Resolves one header dependency into its entry attributes; null when createrepo_c would skip it. */
function toEntry(dep: Dependency, pre: boolean): RepoDependency | null {
  const flags = relationFlag(dep.flags);
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
function provideKey(dep: Dependency): string {
  const flags = relationFlag(dep.flags);
  return flags === null ? dep.name : `${dep.name}${flags}${dep.version}`;
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
  // Built only when a require names a primary path: most packages never need it.
  let ownFiles: Set<string> | null = null;
  const shipsPrimaryFile = (path: string): boolean => {
    if (!path.startsWith("/") || !isPrimaryFile(path)) return false;
    ownFiles ??= new Set(pkg.files.map((f) => f.path));
    return ownFiles.has(path);
  };
  const provided = new Set(pkg.dependencies.provides.map(provideKey));
  const lastKept = new Map<string, RepoDependency & { version: string }>();
  const requires: RepoDependency[] = [];
  const recommends: RepoDependency[] = [];
  let libc: RepoDependency | null = null;

  for (const dep of pkg.dependencies.requires) {
    if (dep.name.startsWith("rpmlib(")) continue;
    if (shipsPrimaryFile(dep.name)) continue;
    if (provided.has(provideKey(dep))) continue;
    const pre = (dep.flags & PRE_BITS) !== 0;
    const previous = lastKept.get(dep.name);
    if (
      previous !== undefined &&
      previous.flags === relationFlag(dep.flags) &&
      previous.version === dep.version &&
      previous.pre === pre
    ) {
      continue;
    }
    const entry = toEntry(dep, pre);
    if (entry === null) continue;
    if ((dep.flags & MISSINGOK) !== 0) {
      // Weak dependencies carry no pre attribute.
      recommends.push({ ...entry, pre: false });
      continue;
    }
    if (dep.name.startsWith("libc.so.6")) {
      if (libc === null || compareLibcRequire(libc.name, dep.name) < 0) libc = entry;
      continue;
    }
    requires.push(entry);
    lastKept.set(dep.name, { ...entry, version: dep.version });
  }
  if (libc !== null) requires.push(libc);
  return { requires, recommends };
}

/** Every dependency section of primary.xml for `pkg`, in createrepo_c's order and filtering. */
export function repoDependencies(pkg: RpmPackage): Record<DependencyKind, RepoDependency[]> {
  const out = {} as Record<DependencyKind, RepoDependency[]>;
  for (const kind of DEPENDENCY_KINDS) {
    if (kind === "requires") continue;
    out[kind] = pkg.dependencies[kind].map((d) => toEntry(d, false)).filter((d) => d !== null);
  }
  const { requires, recommends } = filterRequires(pkg);
  out.requires = requires;
  out.recommends = [...recommends, ...out.recommends];
  return out;
}
