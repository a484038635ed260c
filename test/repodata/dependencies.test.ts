import { describe, expect, it } from "vitest";
import {
  compareLibcRequire,
  type RepoDependency,
  repoDependencies,
  splitVersion,
} from "../../src/repodata/dependencies.js";
import { dep, FLAGS, makePackage } from "./make-package.js";

const names = (deps: readonly RepoDependency[]) => deps.map((d) => d.name);

describe("dependency entries", () => {
  it("maps flags & 0xF to LT GT EQ LE GE and ignores the higher bits", () => {
    const pkg = makePackage({
      dependencies: {
        provides: [
          dep("a", FLAGS.LT, "1"),
          dep("b", FLAGS.GT | FLAGS.SCRIPT_PRE, "1"),
          dep("c", FLAGS.EQ, "1"),
          dep("d", FLAGS.LE, "1"),
          dep("e", FLAGS.GE, "1"),
        ],
      },
    });
    expect(repoDependencies(pkg).provides.map((d) => d.flags)).toEqual([
      "LT",
      "GT",
      "EQ",
      "LE",
      "GE",
    ]);
  });

  it("writes neither flags nor version when the comparison bits mean nothing", () => {
    const pkg = makePackage({
      dependencies: { conflicts: [dep("x", 6, "1.0-1"), dep("y", 0, "")] },
    });
    for (const d of repoDependencies(pkg).conflicts) {
      expect(d).toMatchObject({ flags: null, epoch: null, ver: null, rel: null });
    }
  });

  it("writes flags without version attributes when the version is empty", () => {
    const pkg = makePackage({ dependencies: { obsoletes: [dep("x", FLAGS.EQ, "")] } });
    expect(repoDependencies(pkg).obsoletes[0]).toMatchObject({
      flags: "EQ",
      epoch: null,
      ver: null,
      rel: null,
    });
  });

  it("splits E:V-R with epoch 0 when absent and the release after the first dash", () => {
    expect(splitVersion("2:1.0-3")).toEqual({ epoch: "2", ver: "1.0", rel: "3" });
    expect(splitVersion("1.0")).toEqual({ epoch: "0", ver: "1.0", rel: "" });
    expect(splitVersion(":10")).toEqual({ epoch: "0", ver: "10", rel: "" });
    expect(splitVersion("5:2-0-1")).toEqual({ epoch: "5", ver: "2", rel: "0-1" });
  });

  it("drops a dependency whose epoch is not a number, as createrepo_c does", () => {
    expect(splitVersion("a:1")).toBeNull();
    const pkg = makePackage({
      dependencies: { requires: [dep("bad", FLAGS.GT, "a:1"), dep("good", FLAGS.GT, "1")] },
    });
    expect(names(repoDependencies(pkg).requires)).toEqual(["good"]);
  });

  it("does not filter provides, conflicts, obsoletes or weak dependencies", () => {
    const twice = [dep("same", FLAGS.EQ, "1"), dep("same", FLAGS.EQ, "1"), dep("rpmlib(X)")];
    const pkg = makePackage({
      dependencies: {
        provides: twice,
        conflicts: twice,
        obsoletes: twice,
        suggests: twice,
        supplements: twice,
      },
    });
    const out = repoDependencies(pkg);
    for (const kind of ["provides", "conflicts", "obsoletes", "suggests", "supplements"] as const) {
      expect(out[kind]).toHaveLength(3);
    }
  });
});

describe("requires filtering", () => {
  it("drops rpmlib() requires", () => {
    const pkg = makePackage({
      dependencies: {
        requires: [
          dep("rpmlib(CompressedFileNames)", FLAGS.LE | FLAGS.RPMLIB, "3.0.4-1"),
          dep("x"),
        ],
      },
    });
    expect(names(repoDependencies(pkg).requires)).toEqual(["x"]);
  });

  it("drops a path the package ships as a primary file but keeps its other own paths", () => {
    const pkg = makePackage({
      files: [
        { path: "/usr/bin/tool", type: "file" },
        { path: "/etc/tool.conf", type: "file" },
        { path: "/usr/share/tool/data", type: "file" },
      ],
      dependencies: {
        requires: [
          dep("/usr/bin/tool"),
          dep("/etc/tool.conf"),
          dep("/usr/share/tool/data"),
          dep("/usr/bin/other"),
        ],
      },
    });
    expect(names(repoDependencies(pkg).requires)).toEqual([
      "/usr/share/tool/data",
      "/usr/bin/other",
    ]);
  });

  it("drops a require identical in name, flags and version to an own provide", () => {
    const pkg = makePackage({
      dependencies: {
        provides: [dep("api", FLAGS.EQ, "2.0"), dep("cap")],
        requires: [
          dep("api", FLAGS.EQ, "2.0"),
          dep("api", FLAGS.GE, "2.0"),
          dep("cap"),
          dep("api", FLAGS.EQ, "2.1"),
        ],
      },
    });
    expect(repoDependencies(pkg).requires.map((d) => `${d.name} ${d.flags} ${d.ver}`)).toEqual([
      "api GE 2.0",
      "api EQ 2.1",
    ]);
  });

  it("marks pre for PREREQ, SCRIPT_PRE and SCRIPT_POST only (createrepo_c 0.17.3 ignores PRETRANS and POSTTRANS)", () => {
    const pkg = makePackage({
      dependencies: {
        requires: [
          dep("prereq", FLAGS.PREREQ),
          dep("pre", FLAGS.SCRIPT_PRE),
          dep("post", FLAGS.SCRIPT_POST),
          dep("preun", FLAGS.SCRIPT_PREUN),
          dep("pretrans", FLAGS.PRETRANS),
          dep("posttrans", FLAGS.POSTTRANS),
        ],
      },
    });
    expect(repoDependencies(pkg).requires.map((d) => [d.name, d.pre])).toEqual([
      ["prereq", true],
      ["pre", true],
      ["post", true],
      ["preun", false],
      ["pretrans", false],
      ["posttrans", false],
    ]);
  });

  it("drops a require equal to the last kept one of that name, but not one that differs in pre", () => {
    const pkg = makePackage({
      dependencies: {
        requires: [
          dep("dup", FLAGS.GE, "1"),
          dep("dup", FLAGS.GE | FLAGS.SCRIPT_PREUN, "1"),
          dep("dup", FLAGS.GE | FLAGS.SCRIPT_PRE, "1"),
          dep("dup", FLAGS.GE | FLAGS.SCRIPT_POST, "1"),
          dep("dup", FLAGS.GE, "1"),
        ],
      },
    });
    expect(repoDependencies(pkg).requires.map((d) => d.pre)).toEqual([false, true, false]);
  });

  it("sends MISSINGOK requires to recommends, ahead of the header's recommends, without pre", () => {
    const pkg = makePackage({
      dependencies: {
        requires: [dep("soft", FLAGS.MISSINGOK | FLAGS.SCRIPT_PRE | FLAGS.GE, "2"), dep("hard")],
        recommends: [dep("rec")],
      },
    });
    const out = repoDependencies(pkg);
    expect(names(out.requires)).toEqual(["hard"]);
    expect(out.recommends.map((d) => [d.name, d.flags, d.pre])).toEqual([
      ["soft", "GE", false],
      ["rec", null, false],
    ]);
  });

  it("does not count a MISSINGOK require as kept when deduplicating, but deduplicates it against kept ones", () => {
    const pkg = makePackage({
      dependencies: {
        requires: [dep("a", FLAGS.MISSINGOK), dep("a"), dep("b"), dep("b", FLAGS.MISSINGOK)],
      },
    });
    const out = repoDependencies(pkg);
    expect(names(out.requires)).toEqual(["a", "b"]);
    expect(names(out.recommends)).toEqual(["a"]);
  });

  it("collapses libc.so.6 requires into the highest one, written last", () => {
    const pkg = makePackage({
      dependencies: {
        requires: [
          dep("libc.so.6()(64bit)"),
          dep("libc.so.6(GLIBC_2.14)(64bit)"),
          dep("zlib"),
          dep("libc.so.6(GLIBC_2.2.5)(64bit)"),
          dep("libc.so.6(GLIBC_2.3.4)(64bit)"),
          dep("zzz"),
        ],
      },
    });
    expect(names(repoDependencies(pkg).requires)).toEqual([
      "zlib",
      "zzz",
      "libc.so.6(GLIBC_2.14)(64bit)",
    ]);
  });

  it("orders libc names by the version in their first parentheses, an unversioned one lowest", () => {
    expect(
      compareLibcRequire("libc.so.6(GLIBC_2.14)(64bit)", "libc.so.6(GLIBC_2.3.4)(64bit)"),
    ).toBeGreaterThan(0);
    expect(compareLibcRequire("libc.so.6", "libc.so.6()(64bit)")).toBe(0);
    expect(compareLibcRequire("libc.so.6()(64bit)", "libc.so.6(GLIBC_2.2.5)")).toBeLessThan(0);
    expect(compareLibcRequire("libc.so.6(GLIBC_2.2.5)", "libc.so.6(GLIBC_2.2.5)(64bit)")).toBe(0);
  });

  it("keeps the first of equally high libc requires", () => {
    const pkg = makePackage({
      dependencies: {
        requires: [
          dep("libc.so.6(GLIBC_2.34)(64bit)", FLAGS.SCRIPT_PRE),
          dep("libc.so.6(GLIBC_2.34)"),
        ],
      },
    });
    expect(repoDependencies(pkg).requires).toEqual([
      {
        name: "libc.so.6(GLIBC_2.34)(64bit)",
        flags: null,
        epoch: null,
        ver: null,
        rel: null,
        pre: true,
      },
    ]);
  });
});
