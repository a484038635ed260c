import { vi } from "vitest";
import { main } from "../../src/cli/main.js";

/** What one CLI run printed, and its exit status. */
export interface CliRun {
  readonly code: number;
  readonly out: string;
  readonly err: string;
}

/** Runs `reposync ARGS` in this process through main(), capturing what it prints. */
export async function runCliInProcess(...args: string[]): Promise<CliRun> {
  let out = "";
  let err = "";
  const o = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
    out += String(chunk);
    return true;
  });
  const e = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
    err += String(chunk);
    return true;
  });
  try {
    const code = await main(["node", "reposync", ...args]);
    return { code, out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}
