import { createHash } from "node:crypto";
import { once } from "node:events";
import { createGzip, type Gzip } from "node:zlib";
import { ReposyncError } from "../errors.js";
import type { PackageFragments } from "./fragments.js";

/**
 * Assembles a repodata snapshot (repomd.xml plus gzip'd primary, filelists and other) from
 * per-package fragments that are already in package order.
 *
 * Output design: the open XML is streamed through gzip and sha256 (`buildSnapshot` never holds
 * it; `index` keeps its batches' blocks in case a skipped file makes it write again); the
 * compressed bytes are held and returned. They are small (a few MB for ten thousand packages), each file's
 * name is the sha256 of its compressed bytes (known only at the end), and the two consumers want
 * bytes anyway: `index` writes them into a folder (`writeSnapshotFiles`), the sync job stores each
 * file's name and bytes in the database.
 *
 * Deterministic: the same fragments, count and revision give the same bytes. Nothing reads the
 * clock; the revision (also every `<timestamp>`) is the caller's, derived from the data. The gzip
 * header Node writes has no name and mtime 0, so only a different zlib build could change the
 * compressed bytes (and then the names change with them, consistently). How the open XML is cut
 * into writes does not matter: zlib is never flushed before the end, so its output depends on the
 * bytes alone, and `index` (a block per batch) and `buildSnapshot` (64 KiB chunks) agree.
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

  constructor(readonly type: RepodataType) {
    this.gzip.on("data", (chunk: Buffer) => this.chunks.push(chunk));
  }

  /**
   * Hashes `bytes` and queues them for zlib, which compresses on its thread pool; the three
   * outputs of a snapshot run there side by side. False when zlib's queue is past its mark.
   */
  write(bytes: Uint8Array): boolean {
    this.openHash.update(bytes);
    this.openSize += bytes.length;
    return this.gzip.write(bytes);
  }

  async drained(): Promise<void> {
    if (this.gzip.writableNeedDrain) await once(this.gzip, "drain");
  }

  abort(): void {
    this.gzip.destroy();
  }

  async finish(): Promise<SnapshotFile> {
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

/** Open XML of one or more consecutive packages for each of the three files, as UTF-8. */
export type RenderedXml = Readonly<Record<RepodataType, Uint8Array>>;

/**
 * Streams packages' XML, in package order, into a snapshot. The root elements state the package
 * count before the first package, so it is fixed up front and checked by `finish`.
 *
 * `add` never waits: the caller either holds the bytes anyway (and then zlib's queue costs no
 * extra memory), or waits for `drained` when `add` says so.
 */
export class SnapshotWriter {
  private readonly outputs = REPODATA_TYPES.map((type) => new GzipOutput(type));
  private readonly roots: ReturnType<typeof rootElements>;
  private count = 0;

  constructor(private readonly packages: number) {
    this.roots = rootElements(packages);
    for (const o of this.outputs) o.write(Buffer.from(this.roots[o.type].open, "utf8"));
  }

  /** Appends the XML of `count` packages. False when the caller should await `drained`. */
  add(count: number, xml: RenderedXml): boolean {
    this.count += count;
    let ready = true;
    for (const o of this.outputs) ready = o.write(xml[o.type]) && ready;
    return ready;
  }

  async drained(): Promise<void> {
    await Promise.all(this.outputs.map((o) => o.drained()));
  }

  /** Stops the compression; the writer cannot be used after. */
  abort(): void {
    for (const o of this.outputs) o.abort();
  }

  /**
   * Closes the root elements and returns the snapshot. Throws when the packages added are not
   * the count announced, since the root elements already said so.
   */
  async finish(revision: number): Promise<RepodataSnapshot> {
    if (this.count !== this.packages) {
      this.abort();
      throw new ReposyncError(
        "CONFLICT",
        `snapshot announced ${this.packages} packages but received ${this.count} fragments`,
      );
    }
    for (const o of this.outputs) o.write(Buffer.from(this.roots[o.type].close, "utf8"));
    const files = await Promise.all(this.outputs.map((o) => o.finish()));
    return {
      revision,
      packages: this.count,
      files,
      repomd: Buffer.from(renderRepomd(files, revision), "utf8"),
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
  const writer = new SnapshotWriter(options.packages);
  // Fragments are gathered into chunks of about 64 KiB of primary.xml: one zlib call per
  // fragment would cost a thread-pool round trip each, which dominates for thousands of packages.
  let pending: Record<RepodataType, string[]> = { primary: [], filelists: [], other: [] };
  let pendingCount = 0;
  let pendingLength = 0;
  const flush = async (): Promise<void> => {
    const xml = {
      primary: Buffer.from(pending.primary.join(""), "utf8"),
      filelists: Buffer.from(pending.filelists.join(""), "utf8"),
      other: Buffer.from(pending.other.join(""), "utf8"),
    };
    const count = pendingCount;
    pending = { primary: [], filelists: [], other: [] };
    pendingCount = 0;
    pendingLength = 0;
    // Backpressure, so a fast producer cannot pile up open XML in zlib's queue.
    if (!writer.add(count, xml)) await writer.drained();
  };
  try {
    for await (const fragment of fragments) {
      pending.primary.push(fragment.primary);
      pending.filelists.push(fragment.filelists);
      pending.other.push(fragment.other);
      pendingCount++;
      pendingLength += fragment.primary.length;
      if (pendingLength >= FLUSH_AT) await flush();
    }
    if (pendingCount > 0) await flush();
  } catch (err) {
    writer.abort();
    throw err;
  }
  return writer.finish(options.revision);
}
