import { execFile } from "node:child_process";
import * as path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** What one dnf run printed, and its exit status. */
export interface DnfResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** A dnf bound to one repository; `check` throws unless it exits 0 and gives its stdout. */
export interface IsolatedDnf {
  (...args: string[]): Promise<DnfResult>;
  check(...args: string[]): Promise<string>;
}

/**
 * A real dnf that sees only the repository at `baseUrl` (as repo "r"), with its own install root
 * and cache under `stateDir`, so nothing of the host (repos, cache, rpmdb) takes part.
 * `--releasever` is needed because the empty root has no release package. gpgcheck is off
 * (the packages carry no signatures we trust); dnf still checks every package's sha256 and size
 * against primary.xml, which is what these tests rely on.
 */
export function isolatedDnf(
  baseUrl: string,
  stateDir: string,
  extra: readonly string[] = [],
): IsolatedDnf {
  const common = [
    "-y",
    "-q",
    "--noplugins",
    `--installroot=${path.join(stateDir, "root")}`,
    "--releasever=1",
    "--setopt=reposdir=/dev/null",
    `--setopt=cachedir=${path.join(stateDir, "cache")}`,
    `--repofrompath=r,${baseUrl}`,
    "--repo=r",
    "--setopt=r.gpgcheck=0",
    ...extra,
  ];
  const dnf = async (...args: string[]): Promise<DnfResult> => {
    try {
      const { stdout, stderr } = await run("dnf", [...common, ...args], {
        env: { ...process.env, LC_ALL: "C.UTF-8" },
        maxBuffer: 64 * 1024 * 1024,
      });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code?: number; stdout?: string; stderr?: string };
      return {
        code: typeof e.code === "number" ? e.code : -1,
        stdout: e.stdout ?? "",
        stderr: e.stderr ?? "",
      };
    }
  };
  return Object.assign(dnf, {
    check: async (...args: string[]): Promise<string> => {
      const res = await dnf(...args);
      if (res.code !== 0) {
        throw new Error(`dnf ${args.join(" ")} exited ${res.code}:\n${res.stderr}${res.stdout}`);
      }
      return res.stdout;
    },
  });
}
