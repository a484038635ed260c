// A module loader hook for bench/replicas-fetch-leases.mjs: it lets plain node import the
// TypeScript test harness the replica tests run (test/replicas/package-downloads.ts), so the
// bench measures exactly what the tests assert instead of a second copy of the scenario.
// Each .ts file is transpiled on its own (no type check: the project's typecheck does that),
// and a `.js` specifier that does not exist next to a .ts importer is tried as `.ts`, which is
// how the sources name their imports (nodenext). Node 20.6+ (module.register).

import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import ts from "typescript";

export async function resolve(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context);
  } catch (err) {
    if (specifier.endsWith(".js") && context.parentURL?.endsWith(".ts")) {
      return nextResolve(`${specifier.slice(0, -3)}.ts`, context);
    }
    throw err;
  }
}

export async function load(url, context, nextLoad) {
  if (!url.endsWith(".ts")) return nextLoad(url, context);
  const fileName = fileURLToPath(url);
  const { outputText } = ts.transpileModule(await readFile(fileName, "utf8"), {
    compilerOptions: {
      module: ts.ModuleKind.ESNext,
      target: ts.ScriptTarget.ES2022,
      verbatimModuleSyntax: true,
    },
    fileName,
  });
  return { format: "module", source: outputText, shortCircuit: true };
}
