/**
 * The package model: everything reposync knows about one RPM, read from its header alone.
 *
 * It is what the parser (`parse-header.ts`) produces and what the repodata writer
 * (`src/repodata/`) consumes; the sync job stores the fragments derived from it. Nothing here
 * depends on the file's bytes beyond the header, except `sha256`, which the caller supplies
 * (GitHub's asset digest, or a streamed hash of the whole file).
 */

/** Dependency kinds in the order createrepo_c writes their primary.xml sections. */
export const DEPENDENCY_KINDS = [
  "provides",
  "requires",
  "conflicts",
  "obsoletes",
  "suggests",
  "enhances",
  "recommends",
  "supplements",
] as const;

export type DependencyKind = (typeof DEPENDENCY_KINDS)[number];

/** One dependency as the header states it: raw flags (all bits), version string "E:V-R" or "". */
export interface Dependency {
  readonly name: string;
  readonly flags: number;
  readonly version: string;
}

export type FileType = "file" | "dir" | "ghost";

/** One file of the package: full path (dirname + basename) and its type, in header order. */
export interface PackageFile {
  readonly path: string;
  readonly type: FileType;
}

/** One changelog entry, in header order (rpm stores newest first). */
export interface ChangelogEntry {
  readonly author: string;
  /** Seconds since the epoch. */
  readonly date: number;
  readonly text: string;
}

/** A parsed RPM package. Strings absent from the header are "". */
export interface RpmPackage {
  readonly name: string;
  /** null when the header has no EPOCH tag (written as "0"). */
  readonly epoch: number | null;
  readonly version: string;
  readonly release: string;
  /** "src" for source packages, whatever ARCH says. */
  readonly arch: string;
  readonly isSource: boolean;
  readonly summary: string;
  readonly description: string;
  readonly packager: string;
  readonly url: string;
  readonly license: string;
  readonly vendor: string;
  readonly group: string;
  readonly buildHost: string;
  /** "" for source packages. */
  readonly sourceRpm: string;
  /** BUILDTIME, seconds since the epoch (0 when absent). */
  readonly buildTime: number;
  /** Byte offsets of the main header: [start, end). */
  readonly headerStart: number;
  readonly headerEnd: number;
  /** Size of the whole .rpm file, from the signature (or v6 main) header. */
  readonly fileSize: number;
  /** Installed size (SIZE / LONGSIZE). */
  readonly installedSize: number;
  /** Uncompressed payload size (PAYLOADSIZE / LONGARCHIVESIZE / ARCHIVESIZE). */
  readonly archiveSize: number;
  /** Dependencies of every kind, unfiltered, in header order. */
  readonly dependencies: Readonly<Record<DependencyKind, readonly Dependency[]>>;
  readonly files: readonly PackageFile[];
  readonly changelog: readonly ChangelogEntry[];
}
