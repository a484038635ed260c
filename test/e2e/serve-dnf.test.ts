import { execFile, execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Element, xml2js } from "xml-js";
import { ensureBuilt, reposync, type ServeProcess, startServe } from "../server/cli-process.js";
import { isolatedDnf } from "../support/dnf.js";
import { FakeGitHub } from "../support/fake-github.js";
import { listFixtureRpms } from "../support/fixtures.js";
import { haveTools } from "../support/tools.js";

const run = promisify(execFile);
const UPDATED_AT = "2025-07-01T12:00:00Z";

/** dnf on the served repository alone; weak dependencies off so exactly the named packages come. */
function dnfFor(baseUrl: string, stateDir: string) {
  return isolatedDnf(baseUrl, stateDir, ["--setopt=install_weak_deps=False"]).check;
}

function parse(xml: string): Element {
  return xml2js(xml, { compact: false, captureSpacesBetweenElements: false }) as Element;
}

function children(el: Element | undefined, name?: string): Element[] {
  return (el?.elements ?? []).filter(
    (e) => e.type === "element" && (name === undefined || e.name === name),
  );
}

/** The three metadata files a repomd.xml names, opened, by type. */
async function openRepodata(
  repomd: string,
  read: (href: string) => Promise<Buffer>,
): Promise<Record<string, Element | undefined>> {
  const out: Record<string, Element | undefined> = {};
  for (const data of children(children(parse(repomd), "repomd")[0], "data")) {
    const href = String(children(data, "location")[0]?.attributes?.href);
    out[String(data.attributes?.type)] = children(
      parse(gunzipSync(await read(href)).toString("utf8")),
    )[0];
  }
  return out;
}

// One process, and two worker processes around one engine (the package downloads, primes and
// syncs then cross IPC): dnf must not see a difference.
for (const workers of [1, 2]) {
  describe.skipIf(!haveTools("dnf", "createrepo_c"))(
    `reposync serve --workers ${workers} behind a real dnf, with the fake GitHub as upstream`,
    () => {
      let gh: FakeGitHub;
      let work: string;
      let serve: ServeProcess;
      let base: string;
      const assets = new Map<string, number>();

      beforeAll(async () => {
        ensureBuilt();
        gh = await FakeGitHub.start();
        work = await mkdtemp(path.join(tmpdir(), "reposync-e2e-serve-"));
        const files = await Promise.all(
          listFixtureRpms().map(async (p) => ({
            name: path.basename(p),
            content: await readFile(p),
            updatedAt: UPDATED_AT,
          })),
        );
        gh.addRepo({ owner: "acme", repo: "fx" });
        const release = gh.addRelease("acme", "fx", { tag: "v1", assets: files });
        files.forEach((f, i) => {
          assets.set(f.name, release.assetIds[i] ?? 0);
        });

        const dataDir = path.join(work, "state");
        const env = {
          GITHUB_API_URL: gh.apiUrl,
          GITHUB_SYNC_RATE: "1000",
          GITHUB_SYNC_BURST: "1000",
          REPOSYNC_DATABASE: "",
          STATE_DIRECTORY: "",
          GITHUB_TOKEN: "",
        };
        await reposync(["--data-dir", dataDir, "add-remote", "fx", "acme/fx"], env);
        serve = await startServe(
          ["--data-dir", dataDir, "--listen", "127.0.0.1:0", "--workers", String(workers)],
          env,
        );
        base = `${serve.url}/fx/`;
      }, 120_000);

      afterAll(async () => {
        if (serve && serve.child.exitCode === null) await serve.stop("SIGKILL");
        await gh?.close();
        if (work) await rm(work, { recursive: true, force: true });
      });

      it("dnf makecache reads the repodata of a remote added a moment before (its first sync)", async () => {
        const dnf = dnfFor(base, path.join(work, "dnf-a"));
        await dnf("makecache");
        const out = await dnf("repoquery", "--qf=%{name}", "fx-noarch", "fx-files");
        expect(
          out
            .split("\n")
            .filter((l) => l !== "")
            .sort(),
        ).toEqual(["fx-files", "fx-noarch"]);
      });

      it("dnf installs fx-noarch and its dependency into an install root, each downloaded from GitHub once", async () => {
        const dnf = dnfFor(base, path.join(work, "dnf-a"));
        await dnf("install", "fx-noarch");
        const root = path.join(work, "dnf-a", "root");
        const { stdout } = await run("rpm", [
          "--root",
          root,
          "-q",
          "--qf",
          "%{NAME}\n",
          "fx-noarch",
          "fx-files",
        ]);
        expect(
          stdout
            .split("\n")
            .filter((l) => l !== "")
            .sort(),
        ).toEqual(["fx-files", "fx-noarch"]);

        // A second machine (own cache, own root) downloads the same packages: served from the cache.
        const other = dnfFor(base, path.join(work, "dnf-b"));
        await other(
          "install",
          "--downloadonly",
          `--destdir=${path.join(work, "dest-b")}`,
          "fx-noarch",
        );
        for (const name of ["fx-noarch-2.5-3.noarch.rpm", "fx-files-1.0-1.x86_64.rpm"]) {
          const id = assets.get(name);
          const whole = gh.seen.filter(
            (s) => s.server === "cdn" && s.path === `/assets/${id}` && s.status === 200,
          );
          expect(whole.length, `whole-file downloads of ${name}`).toBe(1);
          const got = await readFile(path.join(work, "dest-b", name));
          expect(
            got.equals(await readFile(listFixtureRpms().find((p) => p.endsWith(name)) ?? "")),
            name,
          ).toBe(true);
        }
      });

      it("serves repodata equal to createrepo_c --no-database on the same files, parsed", async () => {
        // The same files where the repodata says they are, with the asset's time as mtime.
        const ref = path.join(work, "reference");
        const mtime = new Date(UPDATED_AT);
        for (const file of listFixtureRpms()) {
          const name = path.basename(file);
          const dir = path.join(ref, "packages", String(assets.get(name)));
          await mkdir(dir, { recursive: true });
          await writeFile(path.join(dir, name), await readFile(file));
          await utimes(path.join(dir, name), mtime, mtime);
        }
        execFileSync("createrepo_c", ["--no-database", "--quiet", ref], { stdio: "pipe" });

        const fetchBytes = async (href: string) => {
          const res = await fetch(new URL(href, base));
          expect(res.status, href).toBe(200);
          return Buffer.from(await res.arrayBuffer());
        };
        const oursRepomd = (await fetchBytes("repodata/repomd.xml")).toString("utf8");
        const ours = await openRepodata(oursRepomd, fetchBytes);
        const theirs = await openRepodata(
          await readFile(path.join(ref, "repodata", "repomd.xml"), "utf8"),
          (href) => readFile(path.join(ref, href)),
        );
        expect(Object.keys(ours).sort()).toEqual(["filelists", "other", "primary"]);
        for (const type of ["primary", "filelists", "other"]) {
          const mine = ours[type];
          const ref = theirs[type];
          expect(mine?.attributes, type).toEqual(ref?.attributes);
          const minePackages = children(mine, "package");
          const refPackages = children(ref, "package");
          expect(minePackages.length, type).toBe(listFixtureRpms().length);
          refPackages.forEach((refPackage, i) => {
            const label = `${type} ${JSON.stringify(refPackage.attributes ?? children(refPackage, "name")[0])}`;
            expect({ label, pkg: minePackages[i] }).toEqual({ label, pkg: refPackage });
          });
        }
      });

      it("stops on SIGTERM with exit status 0", async () => {
        const code = await serve.stop("SIGTERM");
        expect(code, serve.output()).toBe(0);
        expect(serve.output()).toContain('"msg":"stopped"');
      });
    },
  );
}
