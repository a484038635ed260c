import { execFileSync, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { indexDirectory } from "../../src/repodata/index-directory.js";
import { CORPUS_DIR, REPO_ROOT } from "../support/tools.js";

/**
 * The worker-thread path only exists in the compiled CLI (tests run the TypeScript sources, where
 * indexDirectory works in-thread). This runs the built `bin/reposync index` on enough files to use
 * the workers and checks it writes exactly the bytes the in-thread path writes for the same files.
 * It needs dist/ (built by `npm ci` through `prepare`, or `npm run build`).
 */
const CLI = join(REPO_ROOT, "bin", "reposync");
const BUILT = existsSync(join(REPO_ROOT, "dist", "repodata", "index-worker.js"));

/** Every file of dir/repodata, name and bytes. */
async function repodataOf(dir: string): Promise<string[][]> {
  const files = (await readdir(join(dir, "repodata"))).sort();
  return Promise.all(
    files.map(async (f) => [f, (await readFile(join(dir, "repodata", f))).toString("base64")]),
  );
}

describe.skipIf(!BUILT)("index on worker threads (built CLI)", () => {
  let root: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "reposync-threads-"));
    const names = (await readdir(CORPUS_DIR)).filter((n) => n.endsWith(".rpm"));
    // Well over one batch of 64 files, spread over subfolders.
    for (let copy = 0; copy < 12; copy++) {
      for (const dir of ["cli", "lib"]) {
        await cp(CORPUS_DIR, join(root, dir, `set${copy}`), {
          recursive: true,
          preserveTimestamps: true,
        });
      }
    }
    expect(names.length * 12).toBeGreaterThan(64);
    // The same again with files that are not packages, one sorting first and one in the middle:
    // the root elements, written before any package, must still state the true count.
    for (const dir of ["skip-cli", "skip-lib"]) {
      await cp(join(root, "cli"), join(root, dir), { recursive: true, preserveTimestamps: true });
      await writeFile(join(root, dir, "set0", "0-not-a-package.rpm"), "plain text\n");
      await writeFile(join(root, dir, "set5", "m-not-a-package.rpm"), "");
    }
  });

  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  it("writes the same repodata bytes as the in-thread path", async () => {
    const out = execFileSync(CLI, ["index", join(root, "cli")], { encoding: "utf8" });
    expect(out).toMatch(/^indexed \d+ packages, skipped 0, wrote /);
    await indexDirectory(join(root, "lib"), { changelogLimit: 10, threads: 0 });
    expect(await repodataOf(join(root, "cli"))).toEqual(await repodataOf(join(root, "lib")));
  });

  it("writes the in-thread path's bytes when files are skipped, with the true package count", async () => {
    const run = spawnSync(CLI, ["index", join(root, "skip-cli")], { encoding: "utf8" });
    expect(run.status).toBe(0);
    expect(run.stderr).toContain("skipped set0/0-not-a-package.rpm: ");
    expect(run.stderr).toContain("skipped set5/m-not-a-package.rpm: ");
    const out = run.stdout;
    const indexed = await indexDirectory(join(root, "lib"), { changelogLimit: 10, threads: 0 });
    expect(out).toMatch(
      new RegExp(`^indexed ${indexed.packages} packages, skipped 2, wrote `, "m"),
    );
    const inThread = await indexDirectory(join(root, "skip-lib"), {
      changelogLimit: 10,
      threads: 0,
    });
    expect(inThread.skipped).toBe(2);
    expect(await repodataOf(join(root, "skip-cli"))).toEqual(
      await repodataOf(join(root, "skip-lib")),
    );
    // Skipping changed nothing but the count: the same packages as the folder without them.
    expect(await repodataOf(join(root, "skip-lib"))).toEqual(await repodataOf(join(root, "lib")));
  });
});
