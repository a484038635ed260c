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
  // The escaping functions throw RPM_FORBIDDEN_TEXT; every string written goes through them.
  return {
    primary: renderPrimary(pkg, ctx),
    filelists: renderFilelists(pkg, ctx),
    other: renderOther(pkg, ctx),
  };
}

function versionElement(pkg: RpmPackage): string {
  return `<version epoch="${pkg.epoch ?? 0}" ver="${attr(pkg.version)}" rel="${attr(pkg.release)}"/>`;
}

function fileLines(pkg: RpmPackage, indent: string, primaryOnly: boolean): string {
  let out = "";
  for (const file of pkg.files) {
    if (primaryOnly && !isPrimaryFile(file.path)) continue;
    const type = file.type === "file" ? "" : ` type="${file.type}"`;
    out += `${indent}<file${type}>${text(file.path)}</file>\n`;
  }
  return out;
}

function entryElement(dep: RepoDependency): string {
  let out = `<rpm:entry name="${attr(dep.name)}"`;
  if (dep.flags !== null) {
    out += ` flags="${dep.flags}"`;
    if (dep.epoch !== null) out += ` epoch="${attr(dep.epoch)}"`;
    if (dep.ver !== null) out += ` ver="${attr(dep.ver)}"`;
    if (dep.rel !== null) out += ` rel="${attr(dep.rel)}"`;
  }
  if (dep.pre) out += ' pre="1"';
  return `${out}/>`;
}

function renderPrimary(pkg: RpmPackage, ctx: FragmentContext): string {
  let out =
    '<package type="rpm">\n' +
    `  <name>${text(pkg.name)}</name>\n` +
    `  <arch>${text(pkg.arch)}</arch>\n` +
    `  ${versionElement(pkg)}\n` +
    `  <checksum type="sha256" pkgid="YES">${text(ctx.sha256)}</checksum>\n` +
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
  out += fileLines(pkg, "    ", true);
  return `${out}  </format>\n</package>\n`;
}

function packageOpening(pkg: RpmPackage, ctx: FragmentContext): string {
  return (
    `<package pkgid="${attr(ctx.sha256)}" name="${attr(pkg.name)}" arch="${attr(pkg.arch)}">\n` +
    `  ${versionElement(pkg)}\n`
  );
}

function renderFilelists(pkg: RpmPackage, ctx: FragmentContext): string {
  return `${packageOpening(pkg, ctx)}${fileLines(pkg, "  ", false)}</package>\n`;
}

function renderOther(pkg: RpmPackage, ctx: FragmentContext): string {
  let out = packageOpening(pkg, ctx);
  for (const entry of selectChangelog(pkg.changelog, ctx.changelogLimit)) {
    out += `  <changelog author="${attr(entry.author)}" date="${entry.date}">${text(entry.text)}</changelog>\n`;
  }
  return `${out}</package>\n`;
}
