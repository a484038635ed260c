import {
  copyFile,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  stat,
  truncate,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isReposyncError } from "../../src/errors.js";
import { indexDirectory } from "../../src/repodata/index-directory.js";
import { CORPUS_DIR } from "../support/tools.js";

const SAMPLE = [
  "fake_bash-1.1.1-1.x86_64.rpm",
  "super_kernel-6.0.1-2.x86_64.rpm",
  "Archer-3.4.5-6.x86_64.rpm",
];

async function snapshotOf(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const name of await readdir(join(dir, "repodata"))) {
    out.set(name, (await readFile(join(dir, "repodata", name))).toString("base64"));
  }
  return out;
}

describe("indexDirectory", () => {
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "reposync-index-"));
    for (const name of SAMPLE) await copyFile(join(CORPUS_DIR, name), join(dir, name));
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("writes the same bytes when run twice on the same files", async () => {
    await indexDirectory(dir, { changelogLimit: 10 });
    const first = await snapshotOf(dir);
    await indexDirectory(dir, { changelogLimit: 10 });
    expect(await snapshotOf(dir)).toEqual(first);
    expect(first.size).toBe(4);
  });

  it("replaces an existing repodata whole and leaves no temporary folder behind", async () => {
    await mkdir(join(dir, "repodata"));
    await writeFile(join(dir, "repodata", "stale-primary.xml.gz"), "old");
    await writeFile(join(dir, "repodata", "repomd.xml"), "old");
    const result = await indexDirectory(dir, { changelogLimit: 10 });
    const names = await readdir(join(dir, "repodata"));
    expect(names).not.toContain("stale-primary.xml.gz");
    expect(names.sort()).toEqual(
      ["repomd.xml", ...result.snapshot.files.map((f) => f.name)].sort(),
    );
    expect(
      (await readFile(join(dir, "repodata", "repomd.xml"))).equals(result.snapshot.repomd),
    ).toBe(true);
    expect((await readdir(dir)).filter((n) => n.startsWith("."))).toEqual([]);
  });

  it("skips a file that is not an RPM, and a truncated one, saying why, and indexes the rest", async () => {
    await writeFile(join(dir, "notes.rpm"), "this is not a package\n");
    await copyFile(join(CORPUS_DIR, "Rimmer-1.0.2-2.x86_64.rpm"), join(dir, "cut.rpm"));
    await truncate(join(dir, "cut.rpm"), (await stat(join(dir, "cut.rpm"))).size - 100);
    await writeFile(join(dir, "README.txt"), "not even named .rpm");
    const skips: [string, string][] = [];
    const progress: [number, number][] = [];
    const result = await indexDirectory(dir, {
      changelogLimit: 10,
      onSkip: (file, reason) => skips.push([file, reason]),
      onProgress: (done, total) => progress.push([done, total]),
    });
    expect(result.packages).toBe(SAMPLE.length);
    expect(result.skipped).toBe(2);
    expect(skips.map(([f]) => f).sort()).toEqual(["cut.rpm", "notes.rpm"]);
    for (const [, reason] of skips) expect(reason).toMatch(/\S/);
    expect(progress.at(-1)).toEqual([5, 5]);
    const primary = result.snapshot.files[0];
    expect(primary?.openSize).toBeGreaterThan(0);
  });

  it("finds packages in subfolders, with the relative path as location, and ignores repodata/", async () => {
    await mkdir(join(dir, "sub", "deeper"), { recursive: true });
    await copyFile(
      join(CORPUS_DIR, "Rimmer-1.0.2-2.x86_64.rpm"),
      join(dir, "sub", "deeper", "Rimmer-1.0.2-2.x86_64.rpm"),
    );
    await mkdir(join(dir, "repodata"));
    await copyFile(
      join(CORPUS_DIR, "empty-0-0.x86_64.rpm"),
      join(dir, "repodata", "empty-0-0.x86_64.rpm"),
    );
    const result = await indexDirectory(dir, { changelogLimit: 10 });
    expect(result.packages).toBe(SAMPLE.length + 1);
    const primary = gunzipSync(result.snapshot.files[0]?.bytes ?? Buffer.alloc(0)).toString("utf8");
    expect(primary).toContain('<location href="sub/deeper/Rimmer-1.0.2-2.x86_64.rpm"/>');
    expect(primary).not.toContain("empty-0-0");
  });

  it("refuses a folder that does not exist, and a file, with a usage error naming it", async () => {
    const missing = join(dir, "nope");
    const e1 = await indexDirectory(missing, { changelogLimit: 10 }).catch((e: unknown) => e);
    expect(isReposyncError(e1, "USAGE") && e1.message.includes(missing)).toBe(true);
    const file = join(dir, SAMPLE[0] as string);
    const e2 = await indexDirectory(file, { changelogLimit: 10 }).catch((e: unknown) => e);
    expect(isReposyncError(e2, "USAGE") && e2.message.includes("not a directory")).toBe(true);
  });
});
