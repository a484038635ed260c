import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import { REPO_ROOT } from "../support/tools.js";

const run = promisify(execFile);

/** The real CLI, as a user (or systemd) runs it: bin/reposync over dist/. */
export const CLI = path.join(REPO_ROOT, "bin", "reposync");
const DIST_MAIN = path.join(REPO_ROOT, "dist", "cli", "main.js");

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile() && entry.name.endsWith(".ts")) {
      newest = Math.max(newest, statSync(path.join(entry.parentPath, entry.name)).mtimeMs);
    }
  }
  return newest;
}

/**
 * Rebuilds dist/ when src/ is newer (CI builds it through `npm ci`'s prepare step), so a local
 * run never tests yesterday's code. tsc emits despite type errors elsewhere; only a missing
 * entry point is fatal.
 */
export function ensureBuilt(): void {
  const src = path.join(REPO_ROOT, "src");
  if (existsSync(DIST_MAIN) && statSync(DIST_MAIN).mtimeMs >= newestMtime(src)) return;
  try {
    execFileSync("npm", ["run", "--silent", "build"], { cwd: REPO_ROOT, stdio: "pipe" });
  } catch (err) {
    if (!existsSync(DIST_MAIN)) {
      const out = err instanceof Error && "stdout" in err ? String(err.stdout) : String(err);
      throw new Error(`npm run build failed and dist/cli/main.js is missing:\n${out}`);
    }
  }
}

/** Runs `reposync ARGS` to its end; rejects with its output when it exits non-zero. */
export async function reposync(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ stdout: string; stderr: string }> {
  try {
    return await run(process.execPath, [CLI, ...args], { env: { ...process.env, ...env } });
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    throw new Error(`reposync ${args.join(" ")} exited ${e.code}:\n${e.stderr}${e.stdout}`);
  }
}

/** A running `reposync serve`. */
export interface ServeProcess {
  /** The base URL it printed (`reposync: serving on URL`). */
  readonly url: string;
  readonly child: ChildProcess;
  /** Everything written so far (stdout and stderr). */
  output(): string;
  /** Sends `signal` and resolves with the exit code once the process has ended. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** Resolves with the exit code when the process ends by itself. */
  readonly exited: Promise<number | null>;
  /** Resolves once the output (stdout and stderr) matches `pattern`: what it logged is the signal. */
  waitFor(pattern: RegExp): Promise<void>;
}

/** Starts `reposync serve ARGS` and resolves once it says where it listens. */
export function startServe(
  args: string[],
  env: Record<string, string> = {},
): Promise<ServeProcess> {
  const child = spawn(process.execPath, [CLI, "serve", ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let waiters: { pattern: RegExp; done: () => void }[] = [];
  const check = () => {
    const ready = waiters.filter((w) => w.pattern.test(out));
    waiters = waiters.filter((w) => !ready.includes(w));
    for (const w of ready) w.done();
  };
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d.toString();
      check();
      const m = /reposync: serving on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) {
        const url = m[1];
        resolve({
          url,
          child,
          exited,
          output: () => out,
          waitFor: (pattern) =>
            new Promise<void>((done) => {
              waiters.push({ pattern, done });
              check();
            }),
          stop: async (signal = "SIGTERM") => {
            child.kill(signal);
            return exited;
          },
        });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", (d: Buffer) => {
      out += d.toString();
      check();
    });
    void exited.then((code) => reject(new Error(`reposync serve exited ${code}:\n${out}`)));
  });
}
