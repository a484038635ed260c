import { ReposyncError } from "../errors.js";
import {
  HEADER_INTRO_BYTES,
  HeaderBlob,
  type HeaderIntro,
  readHeaderIntro,
} from "./header-blob.js";
import type { RpmPackage } from "./package.js";
import { packageFromHeaders } from "./package-from-header.js";

/**
 * Parsing an RPM's metadata from the first bytes of the file, in steps, so that a caller holding
 * a remote file can fetch exactly the bytes the header needs and no more.
 *
 * Hand-written because this is the heart of the product: no library reads RPM headers from
 * partial byte ranges, with rpm's sanity checks, without a native dependency.
 */

/** What the parser wants next: more bytes, or it is done. */
export type ParseStep =
  | { kind: "need"; start: number; end: number }
  | { kind: "package"; pkg: RpmPackage };

export interface ParseOptions {
  /**
   * Headers ending past this byte are refused with RPM_LIMIT, before anything that large is
   * asked for. Default 32 MiB: headers of several MiB exist (thousands of files), tens do not.
   */
  maxHeaderBytes?: number;
  /**
   * The file's real size when known (GitHub's asset size, a stat). A header ending past it is
   * RPM_TRUNCATED, and a header stating another size is RPM_SIZE_MISMATCH: dnf would refuse the
   * download if `size package` were wrong.
   */
  fileSize?: number;
}

export const DEFAULT_MAX_HEADER_BYTES = 32 * 1024 * 1024;
export const LEAD_BYTES = 96;
const LEAD_MAGIC = [0xed, 0xab, 0xee, 0xdb];
/** Lead's signature_type: RPMSIGTYPE_HEADERSIG, the only one rpm has written since 1997. */
const LEAD_SIGTYPE_HEADERSIG = 5;

/**
 * Given a prefix of an .rpm file (from byte 0), returns either the byte range it needs next
 * (`start` is always `prefix.length`; `end` is the least that lets it progress: the signature
 * header's intro, then the main header's intro at hstart+16, then hend), or the package.
 * Every failure is a ReposyncError with an RPM_* code, whatever the input.
 */
export function parseRpmPrefix(prefix: Uint8Array, options: ParseOptions = {}): ParseStep {
  const buf = Buffer.isBuffer(prefix)
    ? prefix
    : Buffer.from(prefix.buffer, prefix.byteOffset, prefix.byteLength);
  const limits = new Limits(buf.length, options);

  checkLead(buf);
  const sigIntroEnd = LEAD_BYTES + HEADER_INTRO_BYTES;
  const needSigIntro = limits.need(sigIntroEnd, "the signature header's intro");
  if (needSigIntro) return needSigIntro;
  const sigIntro = readHeaderIntro(buf, LEAD_BYTES, "signature header");

  // The signature header is padded to a multiple of 8 so the main header starts aligned.
  const sigLen = sigIntro.length - HEADER_INTRO_BYTES;
  const headerStart = LEAD_BYTES + HEADER_INTRO_BYTES + sigLen + ((8 - (sigLen % 8)) % 8);
  const needMainIntro = limits.need(headerStart + HEADER_INTRO_BYTES, "the main header's intro");
  if (needMainIntro) return needMainIntro;
  const mainIntro = readHeaderIntro(buf, headerStart, "main header");

  const headerEnd = headerStart + mainIntro.length;
  const needMain = limits.need(headerEnd, "the main header");
  if (needMain) return needMain;

  const pkg = buildPackage(buf, sigIntro, mainIntro, headerStart, headerEnd, options.fileSize);
  if (options.fileSize !== undefined && pkg.fileSize !== options.fileSize) {
    throw new ReposyncError(
      "RPM_SIZE_MISMATCH",
      `the header says the file is ${pkg.fileSize} bytes, but it is ${options.fileSize}`,
    );
  }
  return { kind: "package", pkg };
}

function buildPackage(
  buf: Buffer,
  sigIntro: HeaderIntro,
  mainIntro: HeaderIntro,
  headerStart: number,
  headerEnd: number,
  knownFileSize: number | undefined,
): RpmPackage {
  const sig = new HeaderBlob(buf, LEAD_BYTES, sigIntro, "signature header", true);
  const main = new HeaderBlob(buf, headerStart, mainIntro, "main header", false);
  const leadType = buf.readUInt16BE(6);
  return packageFromHeaders(sig, main, { headerStart, headerEnd, leadType, knownFileSize });
}

/** Applies the byte limits to each range the parser is about to need. */
class Limits {
  constructor(
    private readonly have: number,
    private readonly options: ParseOptions,
  ) {}

  /** undefined when `end` bytes are already held; throws when they may not be asked for. */
  need(end: number, what: string): ParseStep | undefined {
    const max = this.options.maxHeaderBytes ?? DEFAULT_MAX_HEADER_BYTES;
    if (end > max) {
      throw new ReposyncError(
        "RPM_LIMIT",
        `${what} ends at byte ${end}, past the limit of ${max} header bytes`,
      );
    }
    const size = this.options.fileSize;
    if (size !== undefined && end > size) {
      throw new ReposyncError(
        "RPM_TRUNCATED",
        `${what} ends at byte ${end}, but the file has only ${size} bytes`,
      );
    }
    return end > this.have ? { kind: "need", start: this.have, end } : undefined;
  }
}

/** Validates as much of the 96-byte lead as is present: it carries nothing else we use. */
function checkLead(buf: Buffer): void {
  const n = Math.min(buf.length, LEAD_MAGIC.length);
  for (let i = 0; i < n; i++) {
    if (buf[i] !== LEAD_MAGIC[i]) {
      throw new ReposyncError("RPM_BAD_LEAD", "not an RPM file: bad lead magic");
    }
  }
  // rpm 4 writes major 3. rpm 6's v6 format writes 4 "for backwards compatibility" (its format
  // document). The corpus's empty-signed-v6-multiple has 3: "v6" there means OpenPGP v6
  // signatures on a v4 package, not the v6 package format.
  const major = buf[4];
  if (major !== undefined && major !== 3 && major !== 4) {
    throw new ReposyncError("RPM_BAD_LEAD", `unsupported lead version ${major}`);
  }
  if (buf.length >= 8) {
    const type = buf.readUInt16BE(6);
    if (type !== 0 && type !== 1) {
      throw new ReposyncError(
        "RPM_BAD_LEAD",
        `lead type ${type} is neither binary (0) nor source (1)`,
      );
    }
  }
  if (buf.length >= 80) {
    const sigType = buf.readUInt16BE(78);
    if (sigType !== LEAD_SIGTYPE_HEADERSIG) {
      throw new ReposyncError("RPM_BAD_LEAD", `lead signature type ${sigType}, expected 5`);
    }
  }
}
