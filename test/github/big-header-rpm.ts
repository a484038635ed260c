import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Builds, with rpmbuild in `dir`, a noarch RPM whose main header ends past 64 KiB (a long
 * description) and whose uncompressed payload makes the file about 1 MB. No corpus RPM has a
 * header that large (the largest ends at 7.5 KiB), and it takes a header that large to see the
 * second ranged read.
 */
export function buildBigHeaderRpm(dir: string): Uint8Array {
  const lines = Array.from(
    { length: 1200 },
    (_, i) => `line ${i} of a description long enough to push the header past sixty-four KiB`,
  );
  const spec = [
    "Name: bigheader",
    "Version: 1.0",
    "Release: 1",
    "Summary: A package whose header is larger than 64 KiB",
    "License: MIT",
    "BuildArch: noarch",
    "%define _binary_payload w0.ufdio",
    "%define _build_id_links none",
    "",
    "%description",
    ...lines,
    "",
    "%install",
    "mkdir -p %{buildroot}/usr/share/bigheader",
    "head -c 1000000 /dev/zero > %{buildroot}/usr/share/bigheader/blob",
    "",
    "%files",
    "/usr/share/bigheader/blob",
    "",
  ].join("\n");
  mkdirSync(dir, { recursive: true });
  const specPath = join(dir, "bigheader.spec");
  writeFileSync(specPath, spec);
  execFileSync("rpmbuild", ["-bb", "--define", `_topdir ${join(dir, "top")}`, specPath], {
    stdio: "ignore",
  });
  const rpmDir = join(dir, "top", "RPMS", "noarch");
  const file = readdirSync(rpmDir).find((f) => f.endsWith(".rpm"));
  if (!file) throw new Error("rpmbuild produced no RPM");
  return readFileSync(join(rpmDir, file));
}
