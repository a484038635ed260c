// The command line of the bench scripts, read one way for all of them: each script gives a spec
// of its flags and gets their values back, read from process.argv by node's util.parseArgs in
// strict mode (a flag not in the spec is refused). Any bad input prints one line that names the
// flag and what it expects, then the usage line (every flag with its default), and exits 2;
// --help prints the usage line and a line of help per flag, and exits 0.
//
// A spec maps each flag's name (`runs` for --runs, also the key of its value) to:
// - kind: "int" (a whole number), "number" (a finite number, fractions allowed), "boolean" (no
//   value: true when given, else false), or a function parsing the text given into the value,
//   which throws an Error whose message says what it expects ("auto or a whole number ...");
// - default: the value when the flag is not given, read like text given on the command line
//   (so a function kind's default is its text, such as "auto"), and shown in the usage line;
// - min: the least value allowed (kinds int and number), or validate: a function that takes the
//   value and returns what is expected (a phrase such as "a number greater than 0") when it
//   refuses it, and nothing when the value is fine;
// - arg: the value's placeholder in the usage (N for "int", X for "number", VALUE otherwise);
// - help: one line saying what the flag does, for --help.

import { basename } from "node:path";
import { parseArgs as parseCommandLine } from "node:util";

const PLACEHOLDERS = { int: "N", number: "X", boolean: "" };

/** Reads the flags in `spec` from `argv` (process.argv after the script) or exits; see above. */
export function parseArgs(spec, argv = process.argv.slice(2)) {
  const flags = Object.entries(spec).map(([name, o]) => ({
    ...o,
    name,
    flag: `--${name}`,
    arg: o.arg ?? PLACEHOLDERS[o.kind] ?? "VALUE",
  }));
  const usage = usageLine(flags);
  const fail = (message) => {
    console.error(`bench: ${message}`);
    console.error(usage);
    process.exit(2);
  };

  const options = { help: { type: "boolean", short: "h" } };
  for (const f of flags) options[f.name] = { type: f.kind === "boolean" ? "boolean" : "string" };
  const valueFlags = new Set(flags.filter((f) => f.kind !== "boolean").map((f) => f.flag));
  let values;
  try {
    ({ values } = parseCommandLine({
      args: joinValues(argv, valueFlags),
      options,
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    fail(describeRefusal(err));
  }

  if (values.help) {
    console.log(usage);
    const width = Math.max(...flags.map((f) => `${f.flag} ${f.arg}`.length));
    for (const f of flags) {
      const least = f.min === undefined ? "" : ` (at least ${f.min})`;
      console.log(`  ${`${f.flag} ${f.arg}`.padEnd(width)}  ${f.help ?? ""}${least}`);
    }
    process.exit(0);
  }

  const opts = {};
  for (const f of flags) {
    if (f.kind === "boolean") {
      opts[f.name] = values[f.name] ?? false;
      continue;
    }
    const raw = values[f.name] ?? (f.default === undefined ? undefined : String(f.default));
    if (raw === undefined) continue;
    const got = raw === "" ? "got nothing" : `got ${raw}`;
    let value;
    try {
      value = parseValue(f, raw);
    } catch (err) {
      fail(`${f.flag}: expected ${err.message}, ${got}`);
    }
    const refused = f.validate?.(value);
    if (refused) fail(`${f.flag}: expected ${refused}, ${got}`);
    opts[f.name] = value;
  }
  return opts;
}

/** The value of a flag of kind int, number or a parse function; throws what was expected. */
function parseValue(f, raw) {
  if (typeof f.kind === "function") return f.kind(raw);
  const text = raw.trim();
  const whole = f.kind === "int";
  const noun = whole ? "a whole number" : "a number";
  const expected = f.min === undefined ? noun : `${noun} of at least ${f.min}`;
  const value = Number(text);
  const ok = whole ? /^-?\d+$/.test(text) && Number.isSafeInteger(value) : Number.isFinite(value);
  if (text === "" || !ok || (f.min !== undefined && value < f.min)) throw new Error(expected);
  return value;
}

/** One line: the script and every flag with its placeholder and default. */
function usageLine(flags) {
  const parts = flags.map((f) => {
    if (f.kind === "boolean") return `[${f.flag}]`;
    const shown = f.default === undefined ? "" : ` (default ${f.default})`;
    return `[${f.flag} ${f.arg}${shown}]`;
  });
  return `usage: node bench/${basename(process.argv[1] ?? "")} ${[...parts, "[--help]"].join(" ")}`;
}

/**
 * Writes `--runs 0` as `--runs=0`. Given apart, a value starting with a dash (`--rate -1`) is
 * one util.parseArgs refuses as ambiguous, which would complain about the dash rather than say
 * what the flag expects; a value flag given last becomes `--runs=`, a value of nothing.
 */
function joinValues(argv, valueFlags) {
  const out = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") {
      out.push(...argv.slice(i));
      break;
    }
    out.push(valueFlags.has(arg) ? `${arg}=${argv[++i] ?? ""}` : arg);
  }
  return out;
}

/** util.parseArgs's refusal, in one line that names the flag or argument. */
function describeRefusal(err) {
  const quoted = /'([^']*)'/.exec(err.message)?.[1] ?? "";
  const flag = quoted.split(" ")[0];
  switch (err.code) {
    case "ERR_PARSE_ARGS_UNKNOWN_OPTION":
      return `unknown flag ${flag} (the flags are listed below)`;
    case "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL":
      return `unexpected argument ${quoted} (every setting is a flag, listed below)`;
    case "ERR_PARSE_ARGS_INVALID_OPTION_VALUE":
      if (/does not take an argument/.test(err.message)) return `${flag}: expected no value`;
      return `${flag}: expected a value`;
    default:
      return err.message.split("\n")[0];
  }
}
