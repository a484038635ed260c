/**
 * Writes RPM files from a list of header entries, for tests that need headers the corpus does
 * not have (legacy tags, v6 sizes, broken entries). Independent of the parser: it follows the
 * layout of rpm-repodata.md section 1.
 */

export type EntryValue =
  | { type: "char" | "int8" | "int16" | "int32" | "int64"; values: number[] }
  | { type: "string"; value: string }
  | { type: "bin"; bytes: Uint8Array }
  | { type: "strings" | "i18n"; values: string[] };

export interface EntrySpec {
  tag: number;
  data: EntryValue;
  /** Override what the index says (to build broken headers). */
  raw?: { type?: number; offset?: number; count?: number };
  /** Bytes of junk inserted in the store before this entry's data. */
  gapBefore?: number;
}

const TYPE_CODE = {
  char: 1,
  int8: 2,
  int16: 3,
  int32: 4,
  int64: 5,
  string: 6,
  bin: 7,
  strings: 8,
  i18n: 9,
};
const WIDTH: Record<string, number> = { char: 1, int8: 1, int16: 2, int32: 4, int64: 8 };

function encodeData(d: EntryValue): { bytes: Buffer; count: number; align: number } {
  switch (d.type) {
    case "string":
      return { bytes: Buffer.from(`${d.value}\0`, "utf8"), count: 1, align: 1 };
    case "strings":
    case "i18n":
      return {
        bytes: Buffer.from(d.values.map((v) => `${v}\0`).join(""), "utf8"),
        count: d.values.length,
        align: 1,
      };
    case "bin":
      return { bytes: Buffer.from(d.bytes), count: d.bytes.length, align: 1 };
    default: {
      const w = WIDTH[d.type]!;
      const b = Buffer.alloc(w * d.values.length);
      d.values.forEach((v, i) => {
        if (w === 1) b.writeUInt8(v, i);
        else if (w === 2) b.writeUInt16BE(v, 2 * i);
        else if (w === 4) b.writeUInt32BE(v >>> 0, 4 * i);
        else b.writeBigUInt64BE(BigInt(v), 8 * i);
      });
      return { bytes: b, count: d.values.length, align: w };
    }
  }
}

/** One header structure: intro, index (in the given order), store. */
export function buildHeader(entries: EntrySpec[]): Buffer {
  const chunks: Buffer[] = [];
  let size = 0;
  const index = Buffer.alloc(16 * entries.length);
  entries.forEach((e, i) => {
    const { bytes, count, align } = encodeData(e.data);
    if (e.gapBefore) {
      chunks.push(Buffer.alloc(e.gapBefore, 0x41));
      size += e.gapBefore;
    }
    const pad = (align - (size % align)) % align;
    chunks.push(Buffer.alloc(pad));
    size += pad;
    index.writeInt32BE(e.tag, 16 * i);
    index.writeUInt32BE(e.raw?.type ?? TYPE_CODE[e.data.type], 16 * i + 4);
    index.writeInt32BE(e.raw?.offset ?? size, 16 * i + 8);
    index.writeUInt32BE(e.raw?.count ?? count, 16 * i + 12);
    chunks.push(bytes);
    size += bytes.length;
  });
  const intro = Buffer.from([0x8e, 0xad, 0xe8, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
  intro.writeUInt32BE(entries.length, 8);
  intro.writeUInt32BE(size, 12);
  return Buffer.concat([intro, index, ...chunks]);
}

/** A 96-byte lead. */
export function buildLead(opts: { type?: number; major?: number } = {}): Buffer {
  const lead = Buffer.alloc(96);
  Buffer.from([0xed, 0xab, 0xee, 0xdb]).copy(lead, 0);
  lead[4] = opts.major ?? 3;
  lead.writeUInt16BE(opts.type ?? 0, 6);
  lead.write("test", 10, "latin1");
  lead.writeUInt16BE(5, 78);
  return lead;
}

export interface BuiltRpm {
  bytes: Buffer;
  headerStart: number;
  headerEnd: number;
}

/**
 * A whole .rpm: lead, signature (padded to 8), main header, `payload` bytes. When
 * `sizeInSignature` is set, a signature SIZE tag (1000) is added that matches the result.
 */
export function buildRpm(opts: {
  signature?: EntrySpec[];
  main: EntrySpec[];
  payload?: number;
  sizeInSignature?: boolean;
  lead?: { type?: number; major?: number };
}): BuiltRpm {
  const payload = Buffer.alloc(opts.payload ?? 0, 0x5a);
  const mainHeader = buildHeader(opts.main);
  const sigEntries = [...(opts.signature ?? [])];
  if (opts.sizeInSignature ?? true) {
    sigEntries.push({
      tag: 1000,
      data: { type: "int32", values: [mainHeader.length + payload.length] },
    });
  }
  const sig = buildHeader(sigEntries);
  const sigPad = Buffer.alloc((8 - (sig.length % 8)) % 8);
  const lead = buildLead(opts.lead);
  const headerStart = lead.length + sig.length + sigPad.length;
  return {
    bytes: Buffer.concat([lead, sig, sigPad, mainHeader, payload]),
    headerStart,
    headerEnd: headerStart + mainHeader.length,
  };
}

/** Entries for NAME, VERSION, RELEASE, ARCH: the least a package has. */
export function basicMain(name = "demo"): EntrySpec[] {
  return [
    { tag: 1000, data: { type: "string", value: name } },
    { tag: 1001, data: { type: "string", value: "1.0" } },
    { tag: 1002, data: { type: "string", value: "1" } },
    { tag: 1022, data: { type: "string", value: "x86_64" } },
  ];
}
