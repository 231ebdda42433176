/**
 * Command-line options as the C tools read them: glibc's getopt(3) for short options
 * ({@link Getopt}) and the message it prints for a bad one ({@link getoptComplaint}); and this
 * port's long options ({@link takeLongOptions}), taken out before getopt sees the arguments.
 */
import { errOut } from './c-compat.js';

/** One option returned by {@link Getopt.next}. */
export interface GetoptItem {
  /** The option character; `'?'` for an unknown option or a missing argument (`':'` for a
   *  missing argument when the option string starts with `':'`); `'\x01'` for a non-option
   *  argument in return-in-order mode (option string starting with `'-'`). */
  opt: string;
  /** The option's argument (`optarg`), when it takes one. */
  optarg?: string;
  /** For `'?'`/`':'`: the offending option character (`optopt`). */
  optopt?: string;
}

/**
 * Take this port's long options (additions to rdma-core's tools) out of `argv`, before a `--`:
 * `flags` stand alone (`--json`), `valued` take a number (`--warmup N` or `--warmup=N`). What is
 * left goes to the tool's getopt string. `bad` names the first valued option without a
 * non-negative integer.
 */
export function takeLongOptions(
  argv: readonly string[],
  flags: readonly string[],
  valued: readonly string[],
): { args: string[]; flags: Set<string>; values: Map<string, number>; bad: string | null } {
  const r = { args: [] as string[], flags: new Set<string>(), values: new Map<string, number>(), bad: null as string | null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--') {
      r.args.push(...argv.slice(i));
      break;
    }
    const name = a.startsWith('--') ? a.slice(2).split('=', 1)[0] as string : '';
    if (flags.includes(name) && a === `--${name}`) {
      r.flags.add(name);
      continue;
    }
    if (!valued.includes(name)) {
      r.args.push(a);
      continue;
    }
    const v = a === `--${name}` ? argv[++i] : a.slice(name.length + 3);
    if (v === undefined || !/^\d+$/.test(v)) {
      r.bad ??= name;
      continue;
    }
    r.values.set(name, Number(v));
  }
  return r;
}

/**
 * getopt(3) with glibc's semantics for short options, always with `opterr = 0` (nothing is
 * printed; the caller reports errors):
 * - grouped flags (`-vVd`), attached (`-S64`) or separate (`-S 64`) arguments;
 * - `--` ends the options; a lone `-` is a non-option argument;
 * - non-option arguments are skipped and collected in {@link operands} (GNU permutation), unless
 *   the option string starts with `'+'` or `POSIXLY_CORRECT` is set (stop at the first one), or it
 *   starts with `'-'` (they are returned in order as option `'\x01'`);
 * - `--name` is not a long option here: it parses as the short option `'-'`, which is unknown.
 */
export class Getopt {
  /** Non-option arguments, in order (complete once {@link next} returned null). */
  readonly operands: string[] = [];
  private readonly args: readonly string[];
  private readonly spec: string;
  private readonly mode: 'permute' | 'stop' | 'inorder';
  private readonly colon: boolean;
  private idx = 0;
  private pos = 0;

  /** @param args the arguments without the program name (`process.argv.slice(2)`). */
  constructor(args: readonly string[], optstring: string) {
    this.args = args;
    let s = optstring;
    let mode: 'permute' | 'stop' | 'inorder' = process.env['POSIXLY_CORRECT'] !== undefined ? 'stop' : 'permute';
    if (s.startsWith('+')) {
      mode = 'stop';
      s = s.slice(1);
    } else if (s.startsWith('-')) {
      mode = 'inorder';
      s = s.slice(1);
    }
    this.mode = mode;
    this.colon = s.startsWith(':');
    this.spec = this.colon ? s.slice(1) : s;
  }

  /** Index of the next argument to look at (`optind`, 0-based without the program name). */
  get optind(): number {
    return this.idx;
  }

  /** The next option, or null when the options are exhausted. */
  next(): GetoptItem | null {
    for (;;) {
      if (this.pos === 0) {
        const a = this.args[this.idx];
        if (a === undefined) return null;
        if (a === '--') {
          this.idx++;
          this.operands.push(...this.args.slice(this.idx));
          this.idx = this.args.length;
          return null;
        }
        if (a.length < 2 || a[0] !== '-') {
          if (this.mode === 'stop') {
            this.operands.push(...this.args.slice(this.idx));
            this.idx = this.args.length;
            return null;
          }
          this.idx++;
          if (this.mode === 'inorder') return { opt: '\x01', optarg: a };
          this.operands.push(a);
          continue;
        }
        this.pos = 1;
      }
      const arg = this.args[this.idx] as string;
      const c = arg[this.pos] as string;
      this.pos++;
      const at = c === ':' || c === ';' ? -1 : this.spec.indexOf(c);
      const atEnd = this.pos >= arg.length;
      if (at < 0) {
        if (atEnd) this.advance();
        return { opt: '?', optopt: c };
      }
      if (this.spec[at + 1] !== ':') {
        if (atEnd) this.advance();
        return { opt: c };
      }
      const optional = this.spec[at + 2] === ':';
      if (!atEnd) {
        const optarg = arg.slice(this.pos);
        this.advance();
        return { opt: c, optarg };
      }
      this.advance();
      if (optional) return { opt: c };
      const nextArg = this.args[this.idx];
      if (nextArg === undefined) return { opt: this.colon ? ':' : '?', optopt: c };
      this.idx++;
      return { opt: c, optarg: nextArg };
    }
  }

  private advance(): void {
    this.idx++;
    this.pos = 0;
  }
}

/**
 * The message glibc's getopt prints (opterr = 1) for an unknown option or a missing argument:
 * `<prog>: invalid option -- 'x'` / `<prog>: option requires an argument -- 'x'` (stderr).
 */
export function getoptComplaint(prog: string, item: GetoptItem, optstring: string): void {
  const c = item.optopt ?? '?';
  const i = optstring.indexOf(c);
  if (i >= 0 && c !== ':' && optstring[i + 1] === ':') errOut(`${prog}: option requires an argument -- '${c}'\n`);
  else errOut(`${prog}: invalid option -- '${c}'\n`);
}

/** One entry of a `struct option` table: the long name, whether it takes an argument, its short option. */
export interface LongOption {
  name: string;
  hasArg: boolean;
  val: string;
}

/**
 * getopt_long(3)'s long options, turned into the short options they stand for before
 * {@link Getopt} reads the arguments: `--name`, `--name=value`, `--name value` and any unambiguous
 * prefix of a name (an exact name wins over the names it prefixes), up to a `--`. A bad one gets
 * glibc's message (stderr, `prog:` first) and `error` is set; the tool then prints its usage and
 * exits as it does for a bad short option.
 */
export function expandLongOptions(prog: string, argv: readonly string[], table: readonly LongOption[]): { args: string[]; error: boolean } {
  const args: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--') {
      args.push(...argv.slice(i));
      break;
    }
    if (!a.startsWith('--')) {
      args.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = a.slice(2, eq < 0 ? undefined : eq);
    const hits = table.find((o) => o.name === name) !== undefined ? table.filter((o) => o.name === name) : table.filter((o) => o.name.startsWith(name));
    if (hits.length === 0) {
      errOut(`${prog}: unrecognized option '${eq < 0 ? a : a.slice(0, eq)}'\n`);
      return { args, error: true };
    }
    if (hits.length > 1) {
      errOut(`${prog}: option '${a.slice(0, eq < 0 ? undefined : eq)}' is ambiguous; possibilities:${hits.map((o) => ` '--${o.name}'`).join('')}\n`);
      return { args, error: true };
    }
    const o = hits[0] as LongOption;
    if (!o.hasArg) {
      if (eq >= 0) {
        errOut(`${prog}: option '--${o.name}' doesn't allow an argument\n`);
        return { args, error: true };
      }
      args.push(`-${o.val}`);
      continue;
    }
    const value = eq >= 0 ? a.slice(eq + 1) : argv[++i];
    if (value === undefined) {
      errOut(`${prog}: option '--${o.name}' requires an argument\n`);
      return { args, error: true };
    }
    args.push(`-${o.val}`, value);
  }
  return { args, error: false };
}

/**
 * Parse `argv` as the tool's getopt_long loop does: `table` gives the long options, `optstring`
 * the short ones, `take(item)` handles each option and returns false for a value it refuses
 * (the C tool then prints its usage and exits 1). Returns the operands, or null after a bad
 * option or value (the caller prints its usage and returns the C tool's status).
 */
export function parseOptions(prog: string, argv: readonly string[], optstring: string, table: readonly LongOption[], take: (o: GetoptItem) => boolean): string[] | null {
  const long = expandLongOptions(prog, argv, table);
  if (long.error) return null;
  const g = new Getopt(long.args, optstring);
  for (let o = g.next(); o !== null; o = g.next()) {
    if (o.opt === '?') {
      const c = o.optopt ?? '?';
      const i = optstring.indexOf(c);
      errOut(i >= 0 && optstring[i + 1] === ':' ? `${prog}: option requires an argument -- '${c}'\n` : `${prog}: invalid option -- '${c}'\n`);
      return null;
    }
    if (!take(o)) return null;
  }
  return g.operands;
}
