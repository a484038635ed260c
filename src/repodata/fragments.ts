import { DEPENDENCY_KINDS, type RpmPackage } from "../rpm/package.js";
import { selectChangelog } from "./changelog.js";
import { type RepoDependency, repoDependencies } from "./dependencies.js";
import { isPrimaryFile } from "./primary-file.js";
import { escapeAttribute as attr, escapeText as text } from "./xml-escape.js";

/**
 * Per-package XML, exactly as createrepo_c 0.17.3 writes it between the opening and closing root
 * elements of primary.xml, filelists.xml and other.xml (each fragment ends with a newline). A
 * fragment is computed once per package and stored, so building a snapshot is a concatenation.
 *
 * Hand-written rather than through an XML library: the output must match createrepo_c's layout
 * and escaping byte for byte, and no serialiser reproduces libxml2's choices.
 */

/** What the header does not say about a package: where it is and what its bytes are. */
export interface FragmentContext {
  /** sha256 (hex) of the whole .rpm file: the pkgid dnf verifies the download against. */
  readonly sha256: string;
  /** `location href`: relative to the folder that holds repodata/ (or an absolute URL). */
  readonly locationHref: string;
  /** `time file`, seconds: the file's mtime for `index`, the asset's date for a remote. */
  readonly fileTime: number;
  /** How many changelog entries other.xml keeps (createrepo_c's --changelog-limit, default 10). */
  readonly changelogLimit: number;
}

/** The three per-package fragments. */
export interface PackageFragments {
  readonly primary: string;
  readonly filelists: string;
  readonly other: string;
}

/**
 * Renders the three fragments of one package. Throws RPM_FORBIDDEN_TEXT when a string it would
 * write holds a control character XML 1.0 cannot carry: createrepo_c refuses such a package too
 * ("Forbidden control chars found"), and dnf could not parse the file if we wrote it.
 */
export function renderPackage(pkg: RpmPackage, ctx: FragmentContext): PackageFragments {
  // The escaping functions throw RPM_FORBIDDEN_TEXT; every string written goes through them,
  // except the sha256 (hex digits we computed) and numbers. What two files share (the version
  // element, the package's opening in filelists and other, file lines) is escaped once.
  const version = `<version epoch="${pkg.epoch ?? 0}" ver="${attr(pkg.version)}" rel="${attr(pkg.release)}"/>`;
  const opening = `<package pkgid="${ctx.sha256}" name="${attr(pkg.name)}" arch="${attr(pkg.arch)}">\n  ${version}\n`;
  const files = fileLines(pkg);
  return {
    primary: renderPrimary(pkg, ctx, version, files.primary),
    filelists: `${opening}${files.all}</package>\n`,
    other: renderOther(pkg, ctx, opening),
  };
}

/**
 * The file lines of filelists.xml (indent 2, every file) and of primary.xml (indent 4, primary
 * files only), each path escaped once.
 */
function fileLines(pkg: RpmPackage): { all: string; primary: string } {
  let all = "";
  let primary = "";
  for (const file of pkg.files) {
    const type = file.type === "file" ? "" : ` type="${file.type}"`;
    const line = `<file${type}>${text(file.path)}</file>\n`;
    all += `  ${line}`;
    if (isPrimaryFile(file.path)) primary += `    ${line}`;
  }
  return { all, primary };
}

function entryElement(dep: RepoDependency): string {
  let out = `<rpm:entry name="${attr(dep.name)}"`;
  if (dep.flags !== null) {
    out += ` flags="${dep.flags}"`;
    // The epoch is digits only (splitVersion drops anything else): nothing to escape.
    if (dep.epoch !== null) out += ` epoch="${dep.epoch}"`;
    if (dep.ver !== null) out += ` ver="${attr(dep.ver)}"`;
    if (dep.rel !== null) out += ` rel="${attr(dep.rel)}"`;
  }
  if (dep.pre) out += ' pre="1"';
  return `${out}/>`;
}

function renderPrimary(
  pkg: RpmPackage,
  ctx: FragmentContext,
  version: string,
  primaryFiles: string,
): string {
  let out =
    '<package type="rpm">\n' +
    `  <name>${text(pkg.name)}</name>\n` +
    `  <arch>${text(pkg.arch)}</arch>\n` +
    `  ${version}\n` +
    `  <checksum type="sha256" pkgid="YES">${ctx.sha256}</checksum>\n` +
    `  <summary>${text(pkg.summary)}</summary>\n` +
    `  <description>${text(pkg.description)}</description>\n` +
    `  <packager>${text(pkg.packager)}</packager>\n` +
    `  <url>${text(pkg.url)}</url>\n` +
    `  <time file="${ctx.fileTime}" build="${pkg.buildTime}"/>\n` +
    `  <size package="${pkg.fileSize}" installed="${pkg.installedSize}" archive="${pkg.archiveSize}"/>\n` +
    `  <location href="${attr(ctx.locationHref)}"/>\n` +
    "  <format>\n" +
    `    <rpm:license>${text(pkg.license)}</rpm:license>\n` +
    `    <rpm:vendor>${text(pkg.vendor)}</rpm:vendor>\n` +
    `    <rpm:group>${text(pkg.group)}</rpm:group>\n` +
    `    <rpm:buildhost>${text(pkg.buildHost)}</rpm:buildhost>\n` +
    `    <rpm:sourcerpm>${text(pkg.sourceRpm)}</rpm:sourcerpm>\n` +
    `    <rpm:header-range start="${pkg.headerStart}" end="${pkg.headerEnd}"/>\n`;
  const dependencies = repoDependencies(pkg);
  for (const kind of DEPENDENCY_KINDS) {
    const entries = dependencies[kind];
    // A section appears only when it has entries.
    if (entries.length === 0) continue;
    out += `    <rpm:${kind}>\n`;
    for (const dep of entries) out += `      ${entryElement(dep)}\n`;
    out += `    </rpm:${kind}>\n`;
  }
  return `${out}${primaryFiles}  </format>\n</package>\n`;
}

function renderOther(pkg: RpmPackage, ctx: FragmentContext, opening: string): string {
  let out = opening;
  for (const entry of selectChangelog(pkg.changelog, ctx.changelogLimit)) {
    out += `  <changelog author="${attr(entry.author)}" date="${entry.date}">${text(entry.text)}</changelog>\n`;
  }
  return `${out}</package>\n`;
}
