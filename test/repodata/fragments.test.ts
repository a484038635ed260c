import { describe, expect, it } from "vitest";
import { isReposyncError } from "../../src/errors.js";
import { selectChangelog } from "../../src/repodata/changelog.js";
import { renderPackage } from "../../src/repodata/fragments.js";
import { isPrimaryFile } from "../../src/repodata/primary-file.js";
import { escapeAttribute, escapeText } from "../../src/repodata/xml-escape.js";
import { CONTEXT, dep, FLAGS, makePackage } from "./make-package.js";

describe("primary files", () => {
  it("are paths under /etc/, paths containing bin/, and /usr/lib/sendmail", () => {
    expect(isPrimaryFile("/etc/x.conf")).toBe(true);
    expect(isPrimaryFile("/usr/bin/x")).toBe(true);
    expect(isPrimaryFile("/usr/sbin/x")).toBe(true);
    expect(isPrimaryFile("/opt/tool/bin/x")).toBe(true);
    expect(isPrimaryFile("/usr/lib/sendmail")).toBe(true);
    expect(isPrimaryFile("/etc")).toBe(false);
    expect(isPrimaryFile("/opt/bin")).toBe(false);
    expect(isPrimaryFile("/binaries")).toBe(false);
    expect(isPrimaryFile("/usr/share/doc/x")).toBe(false);
  });

  it("appear in primary.xml in header order with their type; filelists.xml holds every file", () => {
    const pkg = makePackage({
      files: [
        { path: "/usr/share/doc/demo", type: "dir" },
        { path: "/usr/bin/demo", type: "file" },
        { path: "/etc/demo.d", type: "dir" },
        { path: "/etc/demo.log", type: "ghost" },
        { path: "/usr/share/demo/data", type: "file" },
      ],
    });
    const { primary, filelists } = renderPackage(pkg, CONTEXT);
    expect(primary).toContain(
      '    <file>/usr/bin/demo</file>\n    <file type="dir">/etc/demo.d</file>\n    <file type="ghost">/etc/demo.log</file>\n  </format>\n',
    );
    expect(primary).not.toContain("/usr/share");
    expect(filelists.match(/<file/g)).toHaveLength(5);
    expect(filelists).toContain('  <file type="dir">/usr/share/doc/demo</file>\n');
  });
});

describe("package fragments", () => {
  it("lay out primary, filelists and other as createrepo_c does", () => {
    const pkg = makePackage({
      epoch: 2,
      files: [{ path: "/usr/bin/demo", type: "file" }],
      dependencies: {
        provides: [dep("demo", FLAGS.EQ, "2:1.0-1")],
        requires: [dep("libfoo", FLAGS.GE, "1.2")],
      },
      changelog: [{ author: "A <a@x>", date: 1700000000, text: "- first" }],
    });
    const f = renderPackage(pkg, CONTEXT);
    const sha = CONTEXT.sha256;
    expect(f.primary).toBe(
      `<package type="rpm">
  <name>demo</name>
  <arch>x86_64</arch>
  <version epoch="2" ver="1.0" rel="1"/>
  <checksum type="sha256" pkgid="YES">${sha}</checksum>
  <summary>A demo</summary>
  <description>Demo package</description>
  <packager></packager>
  <url></url>
  <time file="1700000100" build="1700000000"/>
  <size package="7000" installed="10" archive="500"/>
  <location href="demo-1.0-1.x86_64.rpm"/>
  <format>
    <rpm:license>MIT</rpm:license>
    <rpm:vendor></rpm:vendor>
    <rpm:group>Unspecified</rpm:group>
    <rpm:buildhost>builder</rpm:buildhost>
    <rpm:sourcerpm>demo-1.0-1.src.rpm</rpm:sourcerpm>
    <rpm:header-range start="4504" end="6000"/>
    <rpm:provides>
      <rpm:entry name="demo" flags="EQ" epoch="2" ver="1.0" rel="1"/>
    </rpm:provides>
    <rpm:requires>
      <rpm:entry name="libfoo" flags="GE" epoch="0" ver="1.2"/>
    </rpm:requires>
    <file>/usr/bin/demo</file>
  </format>
</package>
`,
    );
    expect(f.filelists).toBe(
      `<package pkgid="${sha}" name="demo" arch="x86_64">\n  <version epoch="2" ver="1.0" rel="1"/>\n  <file>/usr/bin/demo</file>\n</package>\n`,
    );
    expect(f.other).toBe(
      `<package pkgid="${sha}" name="demo" arch="x86_64">\n  <version epoch="2" ver="1.0" rel="1"/>\n  <changelog author="A &lt;a@x&gt;" date="1700000000">- first</changelog>\n</package>\n`,
    );
  });

  it("writes epoch 0 when the header has none and omits empty dependency sections", () => {
    const { primary } = renderPackage(makePackage({ epoch: null }), CONTEXT);
    expect(primary).toContain('<version epoch="0" ver="1.0" rel="1"/>');
    expect(primary).not.toContain("<rpm:provides>");
    expect(primary).not.toContain("<rpm:requires>");
  });

  it("writes the sections in the order provides, requires, conflicts, obsoletes, suggests, enhances, recommends, supplements", () => {
    const one = (name: string) => [dep(name)];
    const pkg = makePackage({
      dependencies: {
        supplements: one("sup"),
        recommends: one("rec"),
        enhances: one("enh"),
        suggests: one("sug"),
        obsoletes: one("obs"),
        conflicts: one("con"),
        requires: one("req"),
        provides: one("pro"),
      },
    });
    const order = [
      ...renderPackage(pkg, CONTEXT).primary.matchAll(
        /<rpm:(provides|requires|conflicts|obsoletes|suggests|enhances|recommends|supplements)>/g,
      ),
    ].map((m) => m[1]);
    expect(order).toEqual([
      "provides",
      "requires",
      "conflicts",
      "obsoletes",
      "suggests",
      "enhances",
      "recommends",
      "supplements",
    ]);
  });

  it("escapes text and attributes differently", () => {
    const pkg = makePackage({
      summary: `A & B <c> "d"\r`,
      url: "http://x/?a=1&b=2",
      files: [{ path: "/etc/a & b <x>.conf", type: "file" }],
      dependencies: { provides: [dep('q"uo\tte\n&<>', 0)] },
      changelog: [{ author: "Tomáš <t@x>", date: 1, text: "- é & <x>" }],
    });
    const f = renderPackage(pkg, CONTEXT);
    expect(f.primary).toContain('<summary>A &amp; B &lt;c&gt; "d"&#13;</summary>');
    expect(f.primary).toContain("<url>http://x/?a=1&amp;b=2</url>");
    expect(f.primary).toContain('<rpm:entry name="q&quot;uo&#9;te&#10;&amp;&lt;&gt;"/>');
    expect(f.filelists).toContain("<file>/etc/a &amp; b &lt;x&gt;.conf</file>");
    expect(f.other).toContain('author="Tom&#xE1;&#x161; &lt;t@x&gt;"');
    expect(f.other).toContain(">- é &amp; &lt;x&gt;</changelog>");
  });

  it("refuses a package whose text holds a control character XML cannot carry", () => {
    const pkg = makePackage({ description: "bell \u0007 here" });
    let caught: unknown;
    try {
      renderPackage(pkg, CONTEXT);
    } catch (err) {
      caught = err;
    }
    expect(isReposyncError(caught, "RPM_FORBIDDEN_TEXT")).toBe(true);
    const inAttribute = makePackage({ dependencies: { provides: [dep("name\u0001")] } });
    expect(() => renderPackage(inAttribute, CONTEXT)).toThrow(/U\+0001/);
    expect(() =>
      renderPackage(makePackage({ description: "tab\tnewline\ncr\r" }), CONTEXT),
    ).not.toThrow();
  });
});

describe("escaping", () => {
  it("keeps quotes, tabs and newlines literal in text", () => {
    expect(escapeText(`"a"\t\n'`)).toBe(`"a"\t\n'`);
  });

  it("writes non-ASCII in attributes as hexadecimal references, astral characters whole", () => {
    expect(escapeAttribute("č😀")).toBe("&#x10D;&#x1F600;");
  });
});

describe("changelog", () => {
  const entry = (author: string, date: number) => ({ author, date, text: `- ${author}` });

  it("keeps the newest entries up to the limit, written oldest first", () => {
    const header = [entry("c", 300), entry("b", 200), entry("a", 100)];
    expect(selectChangelog(header, 2).map((e) => e.author)).toEqual(["b", "c"]);
    expect(selectChangelog(header, 0)).toEqual([]);
    expect(
      renderPackage(makePackage({ changelog: header }), { ...CONTEXT, changelogLimit: 1 }).other,
    ).toContain('author="c" date="300"');
  });

  it("makes equal and colliding dates strictly increasing by +1, +2", () => {
    // The header of the fixture createrepo_c was run on: newest first.
    const header = [
      entry("G", 201),
      entry("F", 200),
      entry("E", 200),
      entry("D", 200),
      entry("C", 102),
      entry("B", 101),
      entry("A", 101),
      entry("Z", 101),
    ];
    expect(selectChangelog(header, 10).map((e) => `${e.author}${e.date}`)).toEqual([
      "Z101",
      "A102",
      "B103",
      "C104",
      "D200",
      "E201",
      "F202",
      "G203",
    ]);
  });

  it("strips trailing spaces from the author", () => {
    expect(selectChangelog([entry("Name <n@x>   ", 1)], 10)[0]?.author).toBe("Name <n@x>");
  });
});
