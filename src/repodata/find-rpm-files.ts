import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";

/**
 * Names inside the indexed folder that are never searched for packages: the repodata we write
 * and the temporary folders of a swap (ours, and createrepo_c's `.repodata`).
 */
export function isRepodataWorkName(name: string): boolean {
  return name === "repodata" || name.startsWith(".repodata");
}

/**
 * Every `*.rpm` file under `dir`, recursively like createrepo_c, as paths relative to `dir` with
 * `/` separators (the `location href`). A symbolic link to a file counts; links to folders are
 * not followed, so a link loop cannot trap the walk.
 */
export async function findRpmFiles(dir: string): Promise<string[]> {
  const found: string[] = [];
  const walk = async (relative: string): Promise<void> => {
    const entries = await readdir(join(dir, relative), { withFileTypes: true });
    for (const entry of entries) {
      if (relative === "" && isRepodataWorkName(entry.name)) continue;
      const rel = relative === "" ? entry.name : `${relative}/${entry.name}`;
      if (entry.isDirectory()) {
        await walk(rel);
      } else if (entry.name.endsWith(".rpm")) {
        if (entry.isFile()) found.push(rel);
        else if (
          entry.isSymbolicLink() &&
          (await stat(join(dir, rel)).catch(() => null))?.isFile()
        ) {
          found.push(rel);
        }
      }
    }
  };
  await walk("");
  return found;
}
