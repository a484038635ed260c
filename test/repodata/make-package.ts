import type { Dependency, DependencyKind, RpmPackage } from "../../src/rpm/package.js";

/** A small hand-built package; tests override what they are about. */
export function makePackage(
  overrides: Partial<Omit<RpmPackage, "dependencies">> & {
    dependencies?: Partial<Record<DependencyKind, Dependency[]>>;
  } = {},
): RpmPackage {
  const { dependencies, ...rest } = overrides;
  return {
    name: "demo",
    epoch: null,
    version: "1.0",
    release: "1",
    arch: "x86_64",
    isSource: false,
    summary: "A demo",
    description: "Demo package",
    packager: "",
    url: "",
    license: "MIT",
    vendor: "",
    group: "Unspecified",
    buildHost: "builder",
    sourceRpm: "demo-1.0-1.src.rpm",
    buildTime: 1700000000,
    headerStart: 4504,
    headerEnd: 6000,
    fileSize: 7000,
    installedSize: 10,
    archiveSize: 500,
    files: [],
    changelog: [],
    ...rest,
    dependencies: {
      provides: [],
      requires: [],
      conflicts: [],
      obsoletes: [],
      suggests: [],
      enhances: [],
      recommends: [],
      supplements: [],
      ...dependencies,
    },
  };
}

/** A dependency as the header would hold it. */
export function dep(name: string, flags = 0, version = ""): Dependency {
  return { name, flags, version };
}

export const FLAGS = {
  LT: 2,
  GT: 4,
  EQ: 8,
  LE: 10,
  GE: 12,
  POSTTRANS: 1 << 5,
  PREREQ: 1 << 6,
  PRETRANS: 1 << 7,
  SCRIPT_PRE: 1 << 9,
  SCRIPT_POST: 1 << 10,
  SCRIPT_PREUN: 1 << 11,
  MISSINGOK: 1 << 19,
  RPMLIB: 1 << 24,
} as const;

export const CONTEXT = {
  sha256: "ab".repeat(32),
  locationHref: "demo-1.0-1.x86_64.rpm",
  fileTime: 1700000100,
  changelogLimit: 10,
};
