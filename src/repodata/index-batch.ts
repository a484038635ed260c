import { indexPackageFile } from "./package-file.js";
import type { RepodataType } from "./snapshot.js";

/** A file left out of the repodata, and why. */
export interface SkippedFile {
  readonly href: string;
  readonly reason: string;
}

/** Consecutive files of a folder, indexed: their XML joined, ready for a `SnapshotWriter`. */
export interface IndexedBatch {
  /** Packages whose XML `xml` holds: the files of the batch less the skipped ones. */
  readonly packages: number;
  /** Each block owns its ArrayBuffer, so a worker can transfer it. */
  readonly xml: Readonly<Record<RepodataType, Uint8Array<ArrayBuffer>>>;
  /** The newest file time (seconds) among those packages; 0 when none. */
  readonly newestFileTime: number;
  readonly skipped: readonly SkippedFile[];
}

/**
 * Indexes `hrefs` in order with `buffer` (READ_CHUNK bytes, reused) and joins their fragments
 * into one UTF-8 block per file. One block per batch instead of three strings per package is
 * what makes the hand-over cheap: a worker transfers three buffers instead of having thousands
 * of small strings cloned, and the snapshot writer hashes and compresses them as they are.
 */
export async function indexBatch(
  dir: string,
  hrefs: readonly string[],
  changelogLimit: number,
  buffer: Buffer,
): Promise<IndexedBatch> {
  let primary = "";
  let filelists = "";
  let other = "";
  let packages = 0;
  let newestFileTime = 0;
  const skipped: SkippedFile[] = [];
  for (const href of hrefs) {
    const outcome = await indexPackageFile(dir, href, changelogLimit, buffer);
    if (!outcome.ok) {
      skipped.push({ href: outcome.href, reason: outcome.reason });
      continue;
    }
    const { fragments, fileTime } = outcome.indexed;
    primary += fragments.primary;
    filelists += fragments.filelists;
    other += fragments.other;
    packages++;
    if (fileTime > newestFileTime) newestFileTime = fileTime;
  }
  // TextEncoder gives each block its own ArrayBuffer (never Buffer's shared pool), so a worker
  // can transfer it.
  const encoder = new TextEncoder();
  return {
    packages,
    xml: {
      primary: encoder.encode(primary),
      filelists: encoder.encode(filelists),
      other: encoder.encode(other),
    },
    newestFileTime,
    skipped,
  };
}
