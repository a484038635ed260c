import { createHash } from "node:crypto";
import { once } from "node:events";
import { createGzip, type Gzip } from "node:zlib";
import { ReposyncError } from "../errors.js";
import type { PackageFragments } from "./fragments.js";

/**
 * Assembles a repodata snapshot (repomd.xml plus gzip'd primary, filelists and other) from
 * per-package fragments that are already in package order.
 *
 * Output design: the open XML is streamed through gzip and sha256 and never held; the compressed
 * bytes are held and returned. They are small (a few MB for ten thousand packages), each file's
 * name is the sha256 of its compressed bytes (known only at the end), and the two consumers want
 * bytes anyway: `index` writes them into a folder (`writeSnapshotFiles`), the sync job stores each
 * file's name and bytes in the database.
 *
 * Deterministic: the same fragments, count and revision give the same bytes. Nothing reads the
 * clock; the revision (also every `<timestamp>`) is the caller's, derived from the data. The gzip
 * header Node writes has no name and mtime 0, so only a different zlib build could change the
 * compressed bytes (and then the names change with them, consistently).
 */

export const REPODATA_TYPES = ["primary", "filelists", "other"] as const;
export type RepodataType = (typeof REPODATA_TYPES)[number];

/** One file of a snapshot with the figures repomd.xml states for it. */
export interface SnapshotFile {
  readonly type: RepodataType;
  /** `<sha256 of compressed>-<type>.xml.gz`, the name inside repodata/. */
  readonly name: string;
  readonly bytes: Buffer;
  /** sha256 (hex) and size of the compressed bytes. */
  readonly sha256: string;
  readonly size: number;
  /** sha256 (hex) and size of the XML before compression. */
  readonly openSha256: string;
  readonly openSize: number;
}

/** A complete snapshot: the three data files and repomd.xml that names them. */
export interface RepodataSnapshot {
  readonly revision: number;
  readonly packages: number;
  readonly files: readonly SnapshotFile[];
  readonly repomd: Buffer;
}

export interface SnapshotOptions {
  /** Number of fragments that will come: the root elements state it before the first one. */
  readonly packages: number;
  /** `<revision>` and every `<timestamp>`, e.g. the newest package's file time. */
  readonly revision: number;
}

const FLUSH_AT = 64 * 1024;
const XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n';
const RPM_NS = 'xmlns:rpm="http://linux.duke.edu/metadata/rpm"';

function rootElements(packages: number): Record<RepodataType, { open: string; close: string }> {
  return {
    primary: {
      open: `${XML_DECLARATION}<metadata xmlns="http://linux.duke.edu/metadata/common" ${RPM_NS} packages="${packages}">\n`,
      close: "</metadata>",
    },
    filelists: {
      open: `${XML_DECLARATION}<filelists xmlns="http://linux.duke.edu/metadata/filelists" packages="${packages}">\n`,
      close: "</filelists>",
    },
    other: {
      open: `${XML_DECLARATION}<otherdata xmlns="http://linux.duke.edu/metadata/other" packages="${packages}">\n`,
      close: "</otherdata>",
    },
  };
}

/**
 * Orders packages as createrepo_c does: by the basename of `location href`, then by the whole
 * href. Sort fragments with it before handing them to `buildSnapshot`.
 */
export function compareLocations(a: string, b: string): number {
  const base = (href: string) => href.slice(href.lastIndexOf("/") + 1);
  return compareStrings(base(a), base(b)) || compareStrings(a, b);
}

/** Byte-wise (code point) order, like C's strcmp on UTF-8, independent of the locale. */
function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** One output: open bytes go through sha256 and gzip; compressed bytes are collected. */
class GzipOutput {
  private readonly gzip: Gzip = createGzip({ level: 6 });
  private readonly openHash = createHash("sha256");
  private openSize = 0;
  private readonly chunks: Buffer[] = [];
  private pending: string[] = [];
  private pendingLength = 0;

  constructor(readonly type: RepodataType) {
    this.gzip.on("data", (chunk: Buffer) => this.chunks.push(chunk));
  }

  /**
   * Buffers small fragments into chunks of about 64 KiB: one zlib call per fragment would cost
   * a thread-pool round trip each, which dominates for thousands of packages.
   */
  async write(text: string): Promise<void> {
    this.pending.push(text);
    this.pendingLength += text.length;
    if (this.pendingLength >= FLUSH_AT) await this.flush();
  }

  private async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const bytes = Buffer.from(this.pending.join(""), "utf8");
    this.pending = [];
    this.pendingLength = 0;
    this.openHash.update(bytes);
    this.openSize += bytes.length;
    // Respect backpressure so a fast producer cannot pile up uncompressed text in zlib's queue.
    if (!this.gzip.write(bytes)) await once(this.gzip, "drain");
  }

  async finish(): Promise<SnapshotFile> {
    await this.flush();
    const ended = once(this.gzip, "end");
    this.gzip.end();
    await ended;
    const bytes = Buffer.concat(this.chunks);
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    return {
      type: this.type,
      name: `${sha256}-${this.type}.xml.gz`,
      bytes,
      sha256,
      size: bytes.length,
      openSha256: this.openHash.digest("hex"),
      openSize: this.openSize,
    };
  }
}

/** Renders repomd.xml for the three files, in createrepo_c's layout. */
export function renderRepomd(files: readonly SnapshotFile[], revision: number): string {
  let out =
    `${XML_DECLARATION}<repomd xmlns="http://linux.duke.edu/metadata/repo" ${RPM_NS}>\n` +
    `  <revision>${revision}</revision>\n`;
  for (const f of files) {
    out +=
      `  <data type="${f.type}">\n` +
      `    <checksum type="sha256">${f.sha256}</checksum>\n` +
      `    <open-checksum type="sha256">${f.openSha256}</open-checksum>\n` +
      `    <location href="repodata/${f.name}"/>\n` +
      `    <timestamp>${revision}</timestamp>\n` +
      `    <size>${f.size}</size>\n` +
      `    <open-size>${f.openSize}</open-size>\n` +
      "  </data>\n";
  }
  return `${out}</repomd>\n`;
}

/**
 * Streams `fragments` (already ordered with `compareLocations`) into a snapshot. Throws when the
 * number of fragments is not `options.packages`, since the root elements already said so.
 */
export async function buildSnapshot(
  fragments: Iterable<PackageFragments> | AsyncIterable<PackageFragments>,
  options: SnapshotOptions,
): Promise<RepodataSnapshot> {
  const roots = rootElements(options.packages);
  const outputs = REPODATA_TYPES.map((type) => new GzipOutput(type));
  const [primary, filelists, other] = outputs as [GzipOutput, GzipOutput, GzipOutput];
  await Promise.all(outputs.map((o) => o.write(roots[o.type].open)));
  let count = 0;
  for await (const fragment of fragments) {
    await Promise.all([
      primary.write(fragment.primary),
      filelists.write(fragment.filelists),
      other.write(fragment.other),
    ]);
    count++;
  }
  if (count !== options.packages) {
    throw new ReposyncError(
      "CONFLICT",
      `snapshot announced ${options.packages} packages but received ${count} fragments`,
    );
  }
  await Promise.all(outputs.map((o) => o.write(roots[o.type].close)));
  const files = await Promise.all(outputs.map((o) => o.finish()));
  return {
    revision: options.revision,
    packages: count,
    files,
    repomd: Buffer.from(renderRepomd(files, options.revision), "utf8"),
  };
}
