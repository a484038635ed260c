import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { ReposyncError } from "../../src/errors.js";
import {
  DEFAULT_MAX_HEADER_BYTES,
  type ParseOptions,
  parseRpmPrefix,
} from "../../src/rpm/parse-header.js";
import { readRpmHeader } from "../../src/rpm/read-header.js";
import { CORPUS_DIR } from "../support/tools.js";
import { basicMain, buildRpm } from "./header-builder.js";
import { corpusNames } from "./reference.js";

/**
 * Robustness: mutated packages must give a package or a ReposyncError with an RPM_* code, never
 * another exception, never a request past maxHeaderBytes, and the ask-and-answer loop must end.
 * The PRNG is seeded, so a failure names a case that can be replayed.
 */

const SEED = 0x5eed_2026;
const CASES_PER_SAMPLE = 1500;
const MAX_STEPS = 4;

/** mulberry32: small, fast, deterministic. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  return { next, int, pick };
}
type Rng = ReturnType<typeof prng>;

interface Sample {
  name: string;
  bytes: Buffer;
  hstart: number;
  hend: number;
}

function layoutOf(name: string, bytes: Buffer): Sample {
  const step = parseRpmPrefix(bytes);
  if (step.kind !== "package") throw new Error(`${name} did not parse`);
  return { name, bytes, hstart: step.pkg.headerStart, hend: step.pkg.headerEnd };
}

const EXTREMES = [
  0, 1, 2, 3, 4, 7, 8, 9, 10, 15, 16, 0xff, 0xffff, 0x10000, 0x0fffffff, 0x10000000, 0x7fffffff,
  0x80000000, 0xfffffff0, 0xffffffff,
];

/** Header positions: [intro offset, nindex, hsize] of the signature and main headers. */
function headers(s: Sample, buf: Buffer): Array<{ at: number; nindex: number; hsize: number }> {
  const out = [];
  for (const at of [96, s.hstart]) {
    if (at + 16 <= buf.length) {
      out.push({ at, nindex: buf.readUInt32BE(at + 8), hsize: buf.readUInt32BE(at + 12) });
    }
  }
  return out;
}

function mutate(s: Sample, rng: Rng): Buffer {
  const buf = Buffer.from(s.bytes);
  const rounds = 1 + rng.int(3);
  for (let r = 0; r < rounds; r++) {
    const hs = headers(s, buf);
    const h = hs.length > 0 ? rng.pick(hs) : undefined;
    const entryCount = h ? Math.min(h.nindex, 0xffff) : 0;
    const entryAt = (i: number) => (h ? h.at + 16 + 16 * i : 0);
    const kind = rng.int(7);
    if (kind === 0) {
      // Random byte flips anywhere in the header bytes.
      const n = 1 + rng.int(8);
      for (let i = 0; i < n; i++) buf[rng.int(s.hend)] = rng.int(256);
    } else if (kind === 1 && h) {
      // Absurd nindex or hsize.
      buf.writeUInt32BE(rng.pick(EXTREMES), h.at + (rng.next() < 0.5 ? 8 : 12));
    } else if (kind === 2 && h && entryCount > 0) {
      // One field of one entry set to an extreme or a nearby value.
      const field = rng.int(4);
      const values = [...EXTREMES, h.hsize, h.hsize - 1, h.hsize + 1, rng.int(2 ** 32)];
      const at = entryAt(rng.int(entryCount)) + 4 * field;
      if (at + 4 <= buf.length) buf.writeUInt32BE(rng.pick(values) >>> 0, at);
    } else if (kind === 3 && h && entryCount > 1) {
      // Overlapping entries: one entry points at another's data, keeping or taking its type.
      const a = entryAt(rng.int(entryCount));
      const b = entryAt(rng.int(entryCount));
      if (Math.max(a, b) + 16 <= buf.length) {
        buf.writeUInt32BE(buf.readUInt32BE(b + 8), a + 8);
        if (rng.next() < 0.5) buf.writeUInt32BE(buf.readUInt32BE(b + 4), a + 4);
        if (rng.next() < 0.5) buf.writeUInt32BE(buf.readUInt32BE(b + 12) + rng.int(3), a + 12);
      }
    } else if (kind === 4 && h && entryCount > 0) {
      // A type changed to any of the ten (or an invalid one).
      const at = entryAt(rng.int(entryCount)) + 4;
      if (at + 4 <= buf.length) buf.writeUInt32BE(rng.int(12), at);
    } else if (kind === 5 && h) {
      // Bytes of the store overwritten: strings lose their NULs, numbers change.
      const storeAt = h.at + 16 + 16 * entryCount;
      const n = 1 + rng.int(32);
      const start = storeAt + rng.int(Math.max(1, Math.min(h.hsize, buf.length - storeAt)));
      for (let i = 0; i < n && start + i < buf.length; i++)
        buf[start + i] = rng.pick([0, 0x41, 0xff]);
    } else {
      // The lead.
      buf[rng.int(96)] = rng.int(256);
    }
  }
  return buf;
}

function truncationPoints(s: Sample, rng: Rng): number[] {
  const points = [0, 1, 3, 4, 5, 8, 79, 80, 95, 96, 97, 111, 112, 113, s.hstart - 1, s.hstart];
  points.push(s.hstart + 1, s.hstart + 15, s.hstart + 16, s.hstart + 17, s.hend - 1, s.hend);
  for (const at of [96, s.hstart]) {
    const nindex = s.bytes.readUInt32BE(at + 8);
    for (let i = 0; i <= nindex; i++) points.push(at + 16 + 16 * i - 1, at + 16 + 16 * i);
  }
  for (let i = 0; i < 40; i++) points.push(rng.int(s.bytes.length + 1));
  return points.filter((p) => p >= 0 && p <= s.bytes.length);
}

type Outcome = "package" | "error";

/** Drives parseRpmPrefix as a reader would: each "need" answered from `buf`, EOF = truncated. */
function drive(buf: Buffer, firstRead: number, options: ParseOptions): Outcome {
  const max = options.maxHeaderBytes ?? DEFAULT_MAX_HEADER_BYTES;
  let prefix = buf.subarray(0, Math.min(firstRead, buf.length));
  for (let steps = 0; steps < MAX_STEPS; steps++) {
    let step: ReturnType<typeof parseRpmPrefix>;
    try {
      step = parseRpmPrefix(prefix, options);
    } catch (err) {
      if (err instanceof ReposyncError && err.code.startsWith("RPM_")) return "error";
      throw err;
    }
    if (step.kind === "package") return "package";
    if (step.start !== prefix.length || step.end <= step.start) {
      throw new Error(`bad need ${step.start}-${step.end} for a prefix of ${prefix.length}`);
    }
    if (step.end > max) throw new Error(`need end ${step.end} past maxHeaderBytes ${max}`);
    if (prefix.length === buf.length) return "error"; // EOF: readRpmHeader says RPM_TRUNCATED.
    prefix = buf.subarray(0, Math.min(step.end, buf.length));
  }
  throw new Error(`no result after ${MAX_STEPS} steps`);
}

function optionsFor(buf: Buffer, rng: Rng): ParseOptions {
  const options: ParseOptions = {};
  if (rng.next() < 0.3) options.maxHeaderBytes = rng.pick([64, 200, 4096, 1 << 20]);
  if (rng.next() < 0.5) options.fileSize = rng.next() < 0.8 ? buf.length : rng.int(buf.length * 2);
  return options;
}

describe("the parser under mutation", () => {
  const samples: Sample[] = corpusNames().map((n) =>
    layoutOf(n, readFileSync(path.join(CORPUS_DIR, n))),
  );
  const synthetic = buildRpm({ main: basicMain(), payload: 20 });
  samples.push(layoutOf("synthetic", synthetic.bytes));

  it.each(samples.map((s) => [s.name, s] as const))(
    "%s: every mutation gives a package or an RPM_* error",
    async (_name, sample) => {
      const rng = prng(SEED ^ sample.bytes.length);
      const outcomes: Record<Outcome, number> = { package: 0, error: 0 };
      const run = (buf: Buffer, label: string) => {
        const firstRead = rng.pick([0, 50, 112, 500, 65536]);
        try {
          outcomes[drive(buf, firstRead, optionsFor(buf, rng))]++;
        } catch (err) {
          throw new Error(`${sample.name} ${label}: ${String(err)}`, { cause: err });
        }
      };
      for (const at of truncationPoints(sample, rng))
        run(sample.bytes.subarray(0, at), `cut@${at}`);
      for (let i = 0; i < CASES_PER_SAMPLE; i++) run(mutate(sample, rng), `mutation #${i}`);
      // Some through the async reader as well, which turns EOF into RPM_TRUNCATED itself.
      for (let i = 0; i < 100; i++) {
        const buf = mutate(sample, rng);
        const result = readRpmHeader(async (start, end) => buf.subarray(start, end), {
          firstRead: rng.pick([50, 500, 65536]),
        }).then(
          () => "package",
          (err: unknown) => {
            if (err instanceof ReposyncError && err.code.startsWith("RPM_")) return "error";
            throw err;
          },
        );
        await expect(result, `${sample.name} reader #${i}`).resolves.toMatch(/^(package|error)$/);
      }
      // Both outcomes occur: the mutations are neither all fatal nor all harmless.
      expect(outcomes.error).toBeGreaterThan(0);
      expect(outcomes.package).toBeGreaterThan(0);
    },
  );
});
