/**
 * The header tags reposync reads (rpm's rpmtag.h numbering). Signature-header tags share numbers
 * with main-header tags (1000 is SIZE in the signature, NAME in the main header), hence two tables.
 */
export const SIG_TAG = {
  LONGSIZE: 270,
  LONGARCHIVESIZE: 271,
  SIZE: 1000,
  PAYLOADSIZE: 1007,
} as const;

export const TAG = {
  NAME: 1000,
  VERSION: 1001,
  RELEASE: 1002,
  EPOCH: 1003,
  SUMMARY: 1004,
  DESCRIPTION: 1005,
  BUILDTIME: 1006,
  BUILDHOST: 1007,
  SIZE: 1009,
  VENDOR: 1011,
  LICENSE: 1014,
  PACKAGER: 1015,
  GROUP: 1016,
  URL: 1020,
  ARCH: 1022,
  OLDFILENAMES: 1027,
  FILEMODES: 1030,
  FILEFLAGS: 1037,
  SOURCERPM: 1044,
  ARCHIVESIZE: 1046,
  PROVIDENAME: 1047,
  REQUIREFLAGS: 1048,
  REQUIRENAME: 1049,
  REQUIREVERSION: 1050,
  CONFLICTFLAGS: 1053,
  CONFLICTNAME: 1054,
  CONFLICTVERSION: 1055,
  CHANGELOGTIME: 1080,
  CHANGELOGNAME: 1081,
  CHANGELOGTEXT: 1082,
  OBSOLETENAME: 1090,
  SOURCEPACKAGE: 1106,
  PROVIDEFLAGS: 1112,
  PROVIDEVERSION: 1113,
  OBSOLETEFLAGS: 1114,
  OBSOLETEVERSION: 1115,
  DIRINDEXES: 1116,
  BASENAMES: 1117,
  DIRNAMES: 1118,
  OLDSUGGESTSNAME: 1156,
  OLDSUGGESTSVERSION: 1157,
  OLDSUGGESTSFLAGS: 1158,
  OLDENHANCESNAME: 1159,
  OLDENHANCESVERSION: 1160,
  OLDENHANCESFLAGS: 1161,
  LONGSIZE: 5009,
  RECOMMENDNAME: 5046,
  RECOMMENDVERSION: 5047,
  RECOMMENDFLAGS: 5048,
  SUGGESTNAME: 5049,
  SUGGESTVERSION: 5050,
  SUGGESTFLAGS: 5051,
  SUPPLEMENTNAME: 5052,
  SUPPLEMENTVERSION: 5053,
  SUPPLEMENTFLAGS: 5054,
  ENHANCENAME: 5055,
  ENHANCEVERSION: 5056,
  ENHANCEFLAGS: 5057,
  /** rpm 6 ("v6") packages: compressed payload size, in the main header. */
  PAYLOADSIZE: 5112,
  /** rpm 6: uncompressed payload (archive) size. */
  PAYLOADSIZEALT: 5113,
} as const;

/** Region markers (HEADERSIGNATURES, HEADERIMMUTABLE): bookkeeping, never metadata. */
export const REGION_SIGNATURES = 62;
export const REGION_IMMUTABLE = 63;

const MAIN_NAMES = new Map<number, string>(Object.entries(TAG).map(([k, v]) => [v, k]));
const SIG_NAMES = new Map<number, string>(Object.entries(SIG_TAG).map(([k, v]) => [v, k]));

/** "1000 (NAME)" for error messages. */
export function describeTag(tag: number, signature: boolean): string {
  const name = (signature ? SIG_NAMES : MAIN_NAMES).get(tag);
  return name === undefined ? `${tag}` : `${tag} (${name})`;
}
