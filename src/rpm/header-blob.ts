import { ReposyncError } from "../errors.js";
import { decodeHeaderText } from "./decode-text.js";
import { describeTag, REGION_IMMUTABLE, REGION_SIGNATURES } from "./tags.js";

/** Bytes of a header's intro: magic (3), version (1), reserved (4), nindex (4), hsize (4). */
export const HEADER_INTRO_BYTES = 16;
/** Bytes of one index entry: tag, type, offset, count. */
export const INDEX_ENTRY_BYTES = 16;
/** rpm's own sanity limits (hdrchkTags / hdrchkData in rpm's header.c). */
export const MAX_NINDEX = 0xffff;
export const MAX_HSIZE = 0x0fffffff;

const TYPE_NULL = 0;
const TYPE_CHAR = 1;
const TYPE_INT8 = 2;
const TYPE_INT16 = 3;
const TYPE_INT32 = 4;
const TYPE_INT64 = 5;
const TYPE_STRING = 6;
const TYPE_STRING_ARRAY = 8;
const TYPE_I18NSTRING = 9;
const TYPE_NAMES = [
  "NULL",
  "CHAR",
  "INT8",
  "INT16",
  "INT32",
  "INT64",
  "STRING",
  "BIN",
  "STRING_ARRAY",
  "I18NSTRING",
];
/** Element size of the fixed-size types, indexed by type; 0 for the string types and NULL. */
const FIXED_SIZE = [0, 1, 1, 2, 4, 8, 0, 1, 0, 0];

const NON_ASCII = /[\x80-\xff]/;

/** The two numbers of a header's intro, once its magic is checked. */
export interface HeaderIntro {
  readonly nindex: number;
  readonly hsize: number;
  /** intro + index + store: the header's length in bytes. */
  readonly length: number;
}

/** Reads and checks the 16-byte intro at `pos` (the caller guarantees the bytes are there). */
export function readHeaderIntro(buf: Buffer, pos: number, what: string): HeaderIntro {
  if (buf[pos] !== 0x8e || buf[pos + 1] !== 0xad || buf[pos + 2] !== 0xe8) {
    throw new ReposyncError("RPM_BAD_HEADER", `${what} at byte ${pos}: bad magic`);
  }
  if (buf[pos + 3] !== 1) {
    throw new ReposyncError("RPM_BAD_HEADER", `${what}: unsupported version ${buf[pos + 3]}`);
  }
  const nindex = buf.readUInt32BE(pos + 8);
  const hsize = buf.readUInt32BE(pos + 12);
  if (nindex > MAX_NINDEX) {
    throw new ReposyncError(
      "RPM_LIMIT",
      `${what}: ${nindex} index entries (rpm allows ${MAX_NINDEX})`,
    );
  }
  if (hsize > MAX_HSIZE) {
    throw new ReposyncError(
      "RPM_LIMIT",
      `${what}: store of ${hsize} bytes (rpm allows ${MAX_HSIZE})`,
    );
  }
  return { nindex, hsize, length: HEADER_INTRO_BYTES + INDEX_ENTRY_BYTES * nindex + hsize };
}

interface Entry {
  readonly type: number;
  readonly offset: number;
  readonly count: number;
}

/**
 * One header (signature or main) whose bytes are all present: every entry is checked when it is
 * built, so the getters below cannot read outside the store. Each entry is decoded from its own
 * type and count, never from where the next entry starts (rpm's own reader does the same; a
 * parser that measures by offsets is fooled by padding and by reordered stores).
 */
export class HeaderBlob {
  private readonly entries = new Map<number, Entry>();
  private readonly store: Buffer;
  /**
   * The store read as Latin-1: one character per byte, so offsets carry over. NULs are found
   * and ASCII strings cut out here by V8's own string functions, without a Buffer call and a
   * copy per string; only a string holding a byte >= 0x80 goes through `decodeHeaderText`.
   */
  private readonly storeText: string;

  constructor(
    buf: Buffer,
    pos: number,
    intro: HeaderIntro,
    private readonly what: string,
    private readonly signature: boolean,
  ) {
    const indexStart = pos + HEADER_INTRO_BYTES;
    const storeStart = indexStart + INDEX_ENTRY_BYTES * intro.nindex;
    this.store = buf.subarray(storeStart, storeStart + intro.hsize);
    this.storeText = this.store.toString("latin1");
    // A DataView over the index: its getters are much cheaper than Buffer's checked readers,
    // and the index is read for every entry of every package.
    const view = new DataView(
      buf.buffer,
      buf.byteOffset + indexStart,
      INDEX_ENTRY_BYTES * intro.nindex,
    );
    for (let p = 0; p < view.byteLength; p += INDEX_ENTRY_BYTES) {
      const tag = view.getInt32(p);
      if (tag === REGION_SIGNATURES || tag === REGION_IMMUTABLE) continue;
      const entry: Entry = {
        type: view.getUint32(p + 4),
        offset: view.getInt32(p + 8),
        count: view.getUint32(p + 12),
      };
      this.check(tag, entry);
      // A duplicated tag is malformed but harmless: the first one wins, consistently.
      if (!this.entries.has(tag)) this.entries.set(tag, entry);
    }
  }

  private fail(tag: number, problem: string): never {
    throw new ReposyncError(
      "RPM_BAD_HEADER",
      `${this.what}: tag ${describeTag(tag, this.signature)} ${problem}`,
    );
  }

  /** rpm's hdrblobVerifyInfo checks, and string termination inside the store. */
  private check(tag: number, e: Entry): void {
    const hsize = this.store.length;
    if (e.type > TYPE_I18NSTRING) this.fail(tag, `has unknown type ${e.type}`);
    if (e.offset < 0 || e.offset > hsize) {
      this.fail(tag, `has offset ${e.offset} outside the ${hsize}-byte store`);
    }
    if (e.type === TYPE_NULL) return;
    if (e.count === 0) this.fail(tag, "has no elements");
    const room = hsize - e.offset;
    const size = FIXED_SIZE[e.type] ?? 0;
    if (size > 0) {
      if (e.offset % size !== 0) {
        this.fail(tag, `(${TYPE_NAMES[e.type]}) is misaligned at offset ${e.offset}`);
      }
      if (e.count > room / size) this.fail(tag, `has ${e.count} elements running past the store`);
      return;
    }
    if (e.type === TYPE_STRING && e.count !== 1) this.fail(tag, `is a STRING of count ${e.count}`);
    // Every string takes at least its NUL: this bounds the scan below by the store's size.
    if (e.count > room) this.fail(tag, `has ${e.count} strings, more than the store can hold`);
    let at = e.offset;
    for (let i = 0; i < e.count; i++) {
      const nul = this.storeText.indexOf("\0", at);
      if (nul < 0) this.fail(tag, "has a string not terminated inside the store");
      at = nul + 1;
    }
  }

  has(tag: number): boolean {
    return this.entries.has(tag);
  }

  /** A string tag: STRING, or the first element of STRING_ARRAY / I18NSTRING (first locale). */
  string(tag: number): string | undefined {
    const e = this.entries.get(tag);
    if (e === undefined) return undefined;
    if (e.type !== TYPE_STRING && e.type !== TYPE_STRING_ARRAY && e.type !== TYPE_I18NSTRING) {
      this.fail(tag, `has type ${TYPE_NAMES[e.type]}, expected a string`);
    }
    return this.textAt(e.offset, this.storeText.indexOf("\0", e.offset));
  }

  /** A string array tag (a single STRING is accepted as an array of one). */
  strings(tag: number): string[] | undefined {
    const e = this.entries.get(tag);
    if (e === undefined) return undefined;
    if (e.type !== TYPE_STRING && e.type !== TYPE_STRING_ARRAY && e.type !== TYPE_I18NSTRING) {
      this.fail(tag, `has type ${TYPE_NAMES[e.type]}, expected strings`);
    }
    const out = new Array<string>(e.count);
    let at = e.offset;
    for (let i = 0; i < e.count; i++) {
      // Termination was checked in check(), so the NUL is inside the store.
      const nul = this.storeText.indexOf("\0", at);
      out[i] = this.textAt(at, nul);
      at = nul + 1;
    }
    return out;
  }

  /** The first element of an integer tag of any width, unsigned. */
  number(tag: number): number | undefined {
    const e = this.entries.get(tag);
    if (e === undefined) return undefined;
    return this.integerAt(tag, e, 0);
  }

  /** All elements of an integer tag of any width, unsigned. */
  numbers(tag: number): number[] | undefined {
    const e = this.entries.get(tag);
    if (e === undefined) return undefined;
    const out = new Array<number>(e.count);
    for (let i = 0; i < e.count; i++) out[i] = this.integerAt(tag, e, i);
    return out;
  }

  /** The string in store bytes [start, end): ASCII as it is, anything else decoded. */
  private textAt(start: number, end: number): string {
    const latin1 = this.storeText.slice(start, end);
    return NON_ASCII.test(latin1) ? decodeHeaderText(this.store, start, end) : latin1;
  }

  private integerAt(tag: number, e: Entry, i: number): number {
    switch (e.type) {
      case TYPE_CHAR:
      case TYPE_INT8:
        return this.store.readUInt8(e.offset + i);
      case TYPE_INT16:
        return this.store.readUInt16BE(e.offset + 2 * i);
      case TYPE_INT32:
        return this.store.readUInt32BE(e.offset + 4 * i);
      case TYPE_INT64:
        return Number(this.store.readBigUInt64BE(e.offset + 8 * i));
      default:
        return this.fail(tag, `has type ${TYPE_NAMES[e.type]}, expected an integer`);
    }
  }
}
