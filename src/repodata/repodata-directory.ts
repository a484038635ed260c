import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { RepodataSnapshot } from "./snapshot.js";

/**
 * Writes a snapshot as `dir/repodata`, replacing any previous one without ever leaving a half
 * written folder under that name.
 *
 * The files go into a fresh temporary folder inside `dir` (same file system, so renames are
 * atomic); then the old repodata is renamed aside, the new one renamed in, and the old one
 * removed. A crash before the swap leaves the old repodata untouched; between the two renames
 * (microseconds) there is briefly no repodata, never a mixed one. Node has no renameat2
 * RENAME_EXCHANGE, which would close even that gap. The leftover temporary folders of a crash
 * start with `.repodata` and are never indexed.
 */
export async function writeRepodataDirectory(
  dir: string,
  snapshot: RepodataSnapshot,
): Promise<string> {
  const target = join(dir, "repodata");
  const fresh = await mkdtemp(join(dir, ".repodata.new-"));
  try {
    for (const file of snapshot.files) {
      await writeFile(join(fresh, file.name), file.bytes, { flush: true });
    }
    // repomd.xml last: a reader of the temporary folder never sees it name a missing file.
    await writeFile(join(fresh, "repomd.xml"), snapshot.repomd, { flush: true });
  } catch (err) {
    await rm(fresh, { recursive: true, force: true });
    throw err;
  }
  const aside = `${fresh.replace(/\.repodata\.new-/, ".repodata.old-")}`;
  let replaced = false;
  try {
    await rename(target, aside);
    replaced = true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
      await rm(fresh, { recursive: true, force: true });
      throw err;
    }
  }
  await rename(fresh, target);
  if (replaced) await rm(aside, { recursive: true, force: true });
  return target;
}
