import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import { SETTINGS } from "../../src/config/schema.js";
import { haveTools, REPO_ROOT } from "../support/tools.js";

const run = promisify(execFile);
const UNIT = path.join(REPO_ROOT, "packaging", "reposync.service");
const ENV_FILE = path.join(REPO_ROOT, "packaging", "reposync.env");

/** systemd-analyze verify's exit status and what it said. */
async function verify(file: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run("systemd-analyze", ["verify", file]);
    return { code: 0, output: `${stdout}${stderr}` };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, output: `${e.stdout ?? ""}${e.stderr ?? ""}` };
  }
}

/** `key=value` pairs of a unit's or env file's lines (comments kept out unless asked). */
function assignments(text: string, commented = false): [string, string][] {
  const re = commented ? /^#?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/ : /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/;
  return text
    .split("\n")
    .map((l) => re.exec(l.trim()))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => [m[1] ?? "", m[2] ?? ""]);
}

describe.skipIf(!haveTools("systemd-analyze"))("packaging/reposync.service", () => {
  let dir: string;
  let unitText: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "reposync-unit-"));
    // verify checks that ExecStart's program exists: point it at this checkout's bin/reposync
    // instead of the installed /usr/local/bin/reposync, and change nothing else.
    unitText = await readFile(UNIT, "utf8");
    expect(unitText).toMatch(/^ExecStart=\/usr\/local\/bin\/reposync serve$/m);
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const withExec = (text: string) =>
    text.replace(/^ExecStart=\S+/m, `ExecStart=${path.join(REPO_ROOT, "bin", "reposync")}`);

  it("passes systemd-analyze verify without a single diagnostic", async () => {
    const file = path.join(dir, "reposync.service");
    await writeFile(file, withExec(unitText));
    const res = await verify(file);
    expect(res.output).toBe("");
    expect(res.code).toBe(0);
  });

  it("is checked for real: a misspelt directive in a copy is reported", async () => {
    const file = path.join(dir, "broken.service");
    await writeFile(file, withExec(unitText).replace("ProtectHome=yes", "ProtectHomme=yes"));
    const res = await verify(file);
    expect(res.output).toContain("ProtectHomme");
  });

  it("runs serve with a state directory, restarts on failure and carries the hardening asked for", () => {
    const settings = new Map(assignments(unitText));
    expect(settings.get("StateDirectory")).toBe("reposync");
    expect(settings.get("Restart")).toBe("on-failure");
    expect(settings.get("NoNewPrivileges")).toBe("yes");
    expect(settings.get("ProtectSystem")).toBe("strict");
    expect(settings.get("ProtectHome")).toBe("yes");
    expect(settings.get("PrivateTmp")).toBe("yes");
    expect(settings.get("EnvironmentFile")).toBe("-/etc/reposync/reposync.env");
  });
});

describe("packaging/reposync.env", () => {
  it("names only variables reposync reads, and its values and commented examples all load", async () => {
    const text = await readFile(ENV_FILE, "utf8");
    const known = new Set(Object.values(SETTINGS).map((s) => ("env" in s ? s.env : undefined)));
    const examples = assignments(text, true);
    expect(examples.length).toBeGreaterThan(5);
    for (const [name] of examples) expect(known, name).toContain(name);
    // As systemd passes them (empty values count as unset), then every example enabled at once.
    expect(() => loadConfig({ env: Object.fromEntries(assignments(text)) })).not.toThrow();
    expect(() => loadConfig({ env: Object.fromEntries(examples) })).not.toThrow();
  });
});
