import { copyFile, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCliInProcess } from "../support/cli-in-process.js";
import { CORPUS_DIR } from "../support/tools.js";

const run = runCliInProcess;

describe("reposync index", () => {
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "reposync-index-cli-"));
    await copyFile(
      join(CORPUS_DIR, "fake_bash-1.1.1-1.x86_64.rpm"),
      join(dir, "fake_bash-1.1.1-1.x86_64.rpm"),
    );
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("indexes a folder and prints one summary line, and a line per skipped file", async () => {
    await writeFile(join(dir, "broken.rpm"), "nope");
    const { code, out, err } = await run("index", dir);
    expect(code).toBe(0);
    expect(out).toBe(`indexed 1 packages, skipped 1, wrote ${join(dir, "repodata")}\n`);
    expect(err).toMatch(/^skipped broken\.rpm: .+\n$/);
    expect(err).not.toContain("    at ");
    expect(await readdir(join(dir, "repodata"))).toContain("repomd.xml");
  });

  it.each(["-1", "abc", "1.5", ""])(
    "rejects --changelog-limit %j naming the flag and the value",
    async (value) => {
      const { code, err } = await run("index", dir, "--changelog-limit", value);
      expect(code).toBe(2);
      expect(err).toContain("--changelog-limit");
      expect(err).toContain(`"${value}"`);
    },
  );

  it("accepts --changelog-limit 0", async () => {
    expect((await run("index", dir, "--changelog-limit", "0")).code).toBe(0);
  });

  it("exits non-zero with a clear message when DIR does not exist", async () => {
    const { code, err, out } = await run("index", join(dir, "missing"));
    expect(code).not.toBe(0);
    expect(err).toContain(`${join(dir, "missing")} does not exist`);
    expect(out).toBe("");
  });
});
