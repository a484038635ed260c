import { spawn } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import ts from "typescript";
import { REPO_ROOT } from "../support/tools.js";

/**
 * A runnable copy of the CLI for tests that need real processes. Each source file is transpiled
 * on its own (no type check: typecheck is CI's separate step) into a folder under the repo's
 * ignored tmp/, so packages resolve from the repo's node_modules and the migrations folder is
 * found by walking up, as from dist/. Returns the path of main.js and a cleanup.
 */
export function buildCli(): { mainJs: string; remove: () => void } {
  const out = join(REPO_ROOT, "tmp", `cli-${process.pid}-${Date.now()}`);
  const src = join(REPO_ROOT, "src");
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
    );
  for (const file of walk(src)) {
    const js = ts.transpileModule(readFileSync(file, "utf8"), {
      compilerOptions: {
        module: ts.ModuleKind.ESNext,
        target: ts.ScriptTarget.ES2022,
        verbatimModuleSyntax: true,
      },
      fileName: file,
    }).outputText;
    const target = join(out, "dist", relative(src, file)).replace(/\.ts$/, ".js");
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, js);
  }
  return {
    mainJs: join(out, "dist", "cli", "main.js"),
    remove: () => rmSync(out, { recursive: true, force: true }),
  };
}

/** Runs `reposync ARGS` as a child process, like bin/reposync does. */
export function runCli(
  mainJs: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const shim = `import(${JSON.stringify(mainJs)}).then(async (m) => { process.exitCode = await m.main(process.argv); });`;
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--input-type=module", "-e", shim, "reposync", ...args],
      {
        env: { PATH: process.env.PATH ?? "", ...env },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}
