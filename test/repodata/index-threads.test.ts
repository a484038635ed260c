import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { cp, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
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
  });

  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  it("writes the same repodata bytes as the in-thread path", async () => {
    const out = execFileSync(CLI, ["index", join(root, "cli")], { encoding: "utf8" });
    expect(out).toMatch(/^indexed \d+ packages, skipped 0, wrote /);
    await indexDirectory(join(root, "lib"), { changelogLimit: 10, threads: 0 });
    const read = async (dir: string) => {
      const files = (await readdir(join(dir, "repodata"))).sort();
      return Promise.all(
        files.map(async (f) => [f, (await readFile(join(dir, "repodata", f))).toString("base64")]),
      );
    };
    expect(await read(join(root, "cli"))).toEqual(await read(join(root, "lib")));
  });
});
