/**
 * perftest's command line (perftest_parameters.c `parser`, `usage`, `init_perftest_params`): the
 * options this port runs, their defaults per test, their range checks and messages, and the exit
 * status of a bad command line (1, after " Parser function exited with Error").
 */
import { Getopt, getoptComplaint } from '../getopt.js';
import { errOut, out } from '../c-compat.js';
import { DEF_PORT } from './exchange.js';

/** The perftest release whose exchange and output this port follows (its VERSION). */
export const PERFTEST_VERSION = '6.06';

/** `VerbType`: the verb under test; the numbers index `testsStr` and choose the print format. */
export enum Verb {
  SEND = 0,
  WRITE = 1,
  READ = 2,
  ATOMIC = 3,
}

/** `TestType` of the tools here. */
export enum Test {
  LAT = 0,
  BW = 1,
}

/** `connStr`: the connection types a command line can name, by their perftest number. */
export const CONN_TYPES = ['RC', 'UC', 'UD'] as const;
export type ConnType = (typeof CONN_TYPES)[number];

/** `atomicTypesStr`. */
export const ATOMIC_TYPES = ['CMP_AND_SWAP', 'FETCH_AND_ADD'] as const;

// Limits of perftest_parameters.h.
const MIN_ITER = 5;
const MAX_ITER = 100_000_000;
const MIN_TX = 1;
const MAX_TX = 15000;
const MIN_RX = 1;
const MAX_RX = 16384;
const MIN_CQ_MOD = 1;
const MAX_CQ_MOD = 1024;
const MAX_INLINE = 912;
const MIN_GID_IX = 0;
const MAX_GID_IX = 64;
const MIN_QP_NUM = 1;
const MAX_QP_NUM = 16384;
/** `UINT_MAX / 2`: the largest message size `-s` takes. */
const MAX_MSG = 0x7fffffff;
/** The sizes `-a` runs up to (2^23, `MAX_SIZE`). */
export const MAX_SIZE_LOG2 = 23;

/** What one run does: `struct perftest_parameters`, the fields this port uses. */
export interface PerfParams {
  verb: Verb;
  tst: Test;
  /** The server's host; null: this process is the server. */
  servername: string | null;
  port: number;
  ibDevname: string | null;
  ibPort: number;
  /** `-m`: 0 for the port's active MTU. */
  mtu: number;
  size: number;
  /** `-s` given. */
  reqSize: boolean;
  iters: number;
  txDepth: number;
  rxDepth: number;
  cqMod: number;
  numQps: number;
  conn: ConnType;
  /** `-x`; -1: chosen by the tool (the best GID on RoCE, none on InfiniBand). */
  gidIndex: number;
  /** `-x` given. */
  useGidUser: boolean;
  /** `-I`; -1: the default of the verb and connection. */
  inlineSize: number;
  /** `-o`; 0: the device's maximum. */
  outReads: number;
  /** `-a`. */
  all: boolean;
  /** `-D`: seconds; 0 for an iteration count. */
  duration: number;
  /** `--report_gbits`. */
  gbits: boolean;
  /** `-F`: no CPU frequency check (this port reads a clock in nanoseconds, never the CPU's). */
  cpuFreqF: boolean;
  /** `-R`. */
  rdmaCm: boolean;
  /** `-A`. */
  atomicType: 0 | 1;
  /** `-Q` given. */
  reqCqMod: boolean;
}

/** `UC_MAX_RX`. */
const UC_MAX_RX = 16000;
/** `MSG_SIZE_CQ_MOD_LIMIT`: above it, every work request is signaled unless `-Q` says otherwise. */
const MSG_SIZE_CQ_MOD_LIMIT = 8192;

/** `force_dependecies`: what the other options imply for depths and moderation. */
function forceDependencies(p: PerfParams): void {
  if (p.duration === 0) {
    if (p.txDepth > p.iters) p.txDepth = p.iters;
    if (p.verb === Verb.SEND && p.rxDepth > p.iters) p.rxDepth = p.iters;
    if ((p.conn === 'UD' || p.conn === 'UC') && p.rxDepth === 512) p.rxDepth = Math.min(p.iters, UC_MAX_RX);
  }
  if (p.size > MSG_SIZE_CQ_MOD_LIMIT && p.conn !== 'UD' && !p.all) {
    if (!p.reqCqMod) p.cqMod = 1;
    else if (p.cqMod > 1) {
      out('---------------------------------------------------------------------------------------\n');
      out('Warning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n');
    }
  }
  if (p.cqMod > p.txDepth) p.cqMod = p.txDepth;
  // perftest's "WA for a bug when rx_depth is odd in SEND" (not with -a).
  if (p.verb === Verb.SEND && p.rxDepth % 2 === 1 && !p.all) p.rxDepth += 1;
  if (p.verb === Verb.READ || p.verb === Verb.ATOMIC) p.inlineSize = 0;
  if (p.all) p.size = 2 ** MAX_SIZE_LOG2;
}

const LONG: Record<string, { short: string; arg: boolean }> = {
  port: { short: 'p', arg: true },
  'ib-dev': { short: 'd', arg: true },
  'ib-port': { short: 'i', arg: true },
  mtu: { short: 'm', arg: true },
  size: { short: 's', arg: true },
  iters: { short: 'n', arg: true },
  'tx-depth': { short: 't', arg: true },
  'rx-depth': { short: 'r', arg: true },
  'cq-mod': { short: 'Q', arg: true },
  qp: { short: 'q', arg: true },
  connection: { short: 'c', arg: true },
  'gid-index': { short: 'x', arg: true },
  inline_size: { short: 'I', arg: true },
  outs: { short: 'o', arg: true },
  duration: { short: 'D', arg: true },
  atomic_type: { short: 'A', arg: true },
  all: { short: 'a', arg: false },
  'CPU-freq': { short: 'F', arg: false },
  rdma_cm: { short: 'R', arg: false },
  help: { short: 'h', arg: false },
  version: { short: 'V', arg: false },
};

const OPTSTRING = 'p:d:i:m:s:n:t:r:Q:q:c:x:I:o:D:A:aFRhV';

/** What the parser decided: run, or exit with a status (help and version: 0 printed, status 1). */
export type ParseResult = { params: PerfParams } | { exit: number; quiet?: boolean };

/** `CHECK_VALUE`: strtol(optarg, &end, 0) with nothing left over. */
function cValue(optarg: string, name: string, type: string): number | null {
  const m = /^\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)$/.exec(optarg);
  if (!m) {
    errOut(` ${name} argument ${optarg} should be ${type}\n`);
    return null;
  }
  const body = m[2] as string;
  const v = body.startsWith('0x') || body.startsWith('0X') ? Number.parseInt(body, 16) : body.length > 1 && body.startsWith('0') ? Number.parseInt(body, 8) : Number(body);
  return m[1] === '-' ? -v : v;
}

function inRange(optarg: string, name: string, type: string, lo: number, hi: number): number | null {
  const v = cValue(optarg, name, type);
  if (v === null) return null;
  if (v < lo || v > hi) {
    errOut(` ${name} should be between ${lo} and ${hi}\n`);
    return null;
  }
  return v;
}

/** `usage()`: the options this port runs, in perftest's layout. */
export function usage(prog: string, verb: Verb, tst: Test): void {
  let s = 'Usage:\n';
  s += `  ${prog}            start a server and wait for connection\n`;
  s += `  ${prog} <host>     connect to server at <host>\n\nOptions:\n`;
  if (verb !== Verb.ATOMIC) s += '  -a, --all  Run sizes from 2 till 2^23\n';
  if (verb === Verb.ATOMIC) s += '  -A, --atomic_type=<type>  type of atomic operation from {CMP_AND_SWAP,FETCH_AND_ADD} (default FETCH_AND_ADD)\n';
  if (verb === Verb.SEND) s += '  -c, --connection=<RC/UC/UD>  Connection type RC/UC/UD (default RC)\n';
  else if (verb === Verb.WRITE) s += '  -c, --connection=<RC/UC>  Connection type RC/UC (default RC)\n';
  else s += '  -c, --connection=<RC>  Connection type RC (default RC)\n';
  s += '  -d, --ib-dev=<dev>  Use IB device <dev> (default first device found)\n';
  s += '  -D, --duration  Run test for a customized period of seconds.\n';
  s += '  -F, --CPU-freq  Do not show a warning even if cpufreq_ondemand module is loaded, and cpu-freq is not on max.\n';
  s += '  -h, --help  Show this help screen.\n';
  s += '  -i, --ib-port=<port>  Use port <port> of IB device (default 1)\n';
  if (verb !== Verb.READ && verb !== Verb.ATOMIC) s += '  -I, --inline_size=<size>  Max size of message to be sent in inline\n';
  s += '  -m, --mtu=<mtu>  MTU size : 256 - 4096 (default port mtu)\n';
  s += `  -n, --iters=<iters>  Number of exchanges (at least ${MIN_ITER}, default ${tst === Test.BW && verb !== Verb.SEND ? 5000 : 1000})\n`;
  if (verb === Verb.READ || verb === Verb.ATOMIC) s += '  -o, --outs=<num>  num of outstanding read/atom(default max of device)\n';
  s += `  -p, --port=<port>  Listen on/connect to port <port> (default ${DEF_PORT})\n`;
  if (tst === Test.BW) s += '  -q, --qp=<num of qp\'s>  Num of qp\'s(default 1)\n';
  if (tst === Test.BW) s += '  -Q, --cq-mod  Generate Cqe only after <--cq-mod> completion\n';
  if (verb === Verb.SEND) s += '  -r, --rx-depth=<dep>  Rx queue size (default 512).\n';
  s += '  -R, --rdma_cm  Connect QPs with rdma_cm and run test on those QPs\n';
  if (verb !== Verb.ATOMIC) s += `  -s, --size=<size>  Size of message to exchange (default ${tst === Test.BW ? 65536 : 2})\n`;
  s += `  -t, --tx-depth=<dep>  Size of tx queue (default ${tst === Test.BW ? 128 : 1})\n`;
  s += '  -V, --version  Display version number\n';
  s += '  -x, --gid-index=<index>  Test uses GID with GID index (Default : IB - no gid . ETH - 0)\n';
  if (tst === Test.BW) s += '      --report_gbits  Report Max/Average BW of test in Gbit/sec (instead of MB/sec)\n';
  out(s);
}

/** Long options to their short letters; `--report_gbits` is taken here. */
function shortenLong(prog: string, argv: readonly string[], p: { gbits: boolean }): string[] | { bad: string } {
  const r: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--') {
      r.push(...argv.slice(i));
      break;
    }
    if (!a.startsWith('--')) {
      r.push(a);
      continue;
    }
    const [name, value] = a.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    if (name === 'report_gbits' && value === undefined) {
      p.gbits = true;
      continue;
    }
    const l = Object.hasOwn(LONG, name) ? LONG[name] : undefined;
    // glibc getopt_long's complaints
    if (!l) {
      errOut(`${prog}: unrecognized option '${a}'\n`);
      return { bad: a };
    }
    if (!l.arg) {
      if (value !== undefined) {
        errOut(`${prog}: option '--${name}' doesn't allow an argument\n`);
        return { bad: a };
      }
      r.push(`-${l.short}`);
    } else if (value !== undefined) r.push(`-${l.short}${value}`);
    else if (i + 1 < argv.length) r.push(`-${l.short}`, argv[++i] as string);
    else {
      errOut(`${prog}: option '--${name}' requires an argument\n`);
      return { bad: a };
    }
  }
  return r;
}

/** `parser()`: the defaults of `verb`/`tst`, then the command line. */
export function parsePerfArgs(prog: string, verb: Verb, tst: Test, argv: readonly string[]): ParseResult {
  const p: PerfParams = {
    verb,
    tst,
    servername: null,
    port: DEF_PORT,
    ibDevname: null,
    ibPort: 1,
    mtu: 0,
    size: verb === Verb.ATOMIC ? 8 : tst === Test.BW ? 65536 : 2,
    reqSize: false,
    iters: tst === Test.BW && verb !== Verb.SEND ? 5000 : 1000,
    txDepth: tst === Test.BW ? 128 : 1,
    rxDepth: verb === Verb.SEND ? 512 : 1,
    cqMod: 100,
    numQps: 1,
    conn: 'RC',
    gidIndex: -1,
    useGidUser: false,
    inlineSize: -1,
    outReads: 0,
    all: false,
    duration: 0,
    gbits: false,
    cpuFreqF: false,
    rdmaCm: false,
    atomicType: 1,
    reqCqMod: false,
  };
  const invalid = (): ParseResult => {
    errOut(' Invalid Command or flag.\n');
    errOut(' Please check command line and run again.\n\n');
    usage(prog, verb, tst);
    return { exit: 1 };
  };
  const args = shortenLong(prog, argv, p);
  if (!Array.isArray(args)) return invalid();
  const g = new Getopt(args, OPTSTRING);
  const bad = (): ParseResult => ({ exit: 1 });
  for (let item = g.next(); item !== null; item = g.next()) {
    const a = item.optarg ?? '';
    let v: number | null = 0;
    switch (item.opt) {
      case 'p': v = cValue(a, 'Port', 'int'); if (v !== null) p.port = v; break;
      case 'd': p.ibDevname = a; break;
      case 'i': v = cValue(a, 'IB Port', 'uint8_t'); if (v !== null) p.ibPort = v & 0xff; break;
      case 'm': v = cValue(a, 'MTU', 'int'); if (v !== null) p.mtu = v; break;
      case 'n': v = inRange(a, 'Iteration num', 'int', MIN_ITER, MAX_ITER); if (v !== null) p.iters = v; break;
      case 't': v = inRange(a, 'Tx depth', 'int', MIN_TX, MAX_TX); if (v !== null) p.txDepth = v; break;
      case 'r':
        v = inRange(a, ' Rx depth', 'int', MIN_RX, MAX_RX);
        if (v !== null && verb !== Verb.SEND && v > 1) {
          errOut(' On RDMA verbs rx depth can be only 1\n');
          return bad();
        }
        if (v !== null) p.rxDepth = v;
        break;
      case 'Q': v = inRange(a, 'CQ moderation', 'int', MIN_CQ_MOD, MAX_CQ_MOD); if (v !== null) { p.cqMod = v; p.reqCqMod = true; } break;
      case 'x': v = inRange(a, 'Gid index', 'uint8_t', MIN_GID_IX, MAX_GID_IX); if (v !== null) { p.gidIndex = v; p.useGidUser = true; } break;
      case 'I':
        v = inRange(a, 'Max inline', 'int', 0, MAX_INLINE);
        if (v !== null && (verb === Verb.READ || verb === Verb.ATOMIC)) {
          errOut(' Inline feature not available on READ/Atomic verbs\n');
          return bad();
        }
        if (v !== null) p.inlineSize = v;
        break;
      case 'o':
        v = cValue(a, 'Outstanding Reads', 'int');
        if (v !== null && verb !== Verb.READ && verb !== Verb.ATOMIC) {
          errOut(' Setting Outstanding reads only available on READ verb\n');
          return bad();
        }
        if (v !== null) p.outReads = v;
        break;
      case 'q':
        if (tst !== Test.BW) {
          errOut(' Multiple QPs only available on bw tests\n');
          return bad();
        }
        v = inRange(a, 'num of Qps', 'int', MIN_QP_NUM, MAX_QP_NUM);
        if (v !== null) p.numQps = v;
        break;
      case 'D':
        v = cValue(a, 'Duration period', 'int');
        if (v !== null && v <= 0) {
          errOut(' Duration period must be positive\n');
          v = null;
        }
        if (v !== null) p.duration = v;
        break;
      case 'c': {
        // change_conn_type
        const t = CONN_TYPES.find((c) => c === a);
        if (t === undefined) {
          errOut(' Invalid Connection type. Please choose from {RC,UC,UD,XRC,DC,SRD}\n');
          return bad();
        }
        if (t === 'UC' && (verb === Verb.READ || verb === Verb.ATOMIC)) {
          errOut(' UC connection not possible in READ/ATOMIC verbs\n');
          return bad();
        }
        if (t === 'UD' && verb !== Verb.SEND) {
          errOut(' UD connection only possible in SEND verb\n');
          return bad();
        }
        p.conn = t;
        break;
      }
      case 'A': {
        if (verb !== Verb.ATOMIC) {
          errOut(' You are not running the atomic_lat/bw test!\n To change the atomic action type, you must run one of the atomic tests\n');
          return bad();
        }
        const t = ATOMIC_TYPES.indexOf(a as (typeof ATOMIC_TYPES)[number]);
        if (t < 0) {
          errOut(' Invalid Atomic type! please choose from {CMP_AND_SWAP,FETCH_AND_ADD}\n');
          return bad();
        }
        p.atomicType = t as 0 | 1;
        break;
      }
      case 's': {
        let s = a;
        let factor = 1;
        if (s.endsWith('K')) {
          s = s.slice(0, -1);
          factor = 1024;
        } else if (s.endsWith('M')) {
          s = s.slice(0, -1);
          factor = 1024 * 1024;
        }
        const n = (Number.parseInt(s, 10) || 0) * factor;
        if (n < 1 || n > MAX_MSG) {
          errOut(` Message Size should be between 1 and ${MAX_MSG}\n`);
          return bad();
        }
        p.size = n;
        p.reqSize = true;
        break;
      }
      case 'a': p.all = true; break;
      case 'F': p.cpuFreqF = true; break;
      case 'R': p.rdmaCm = true; break;
      case 'h': usage(prog, verb, tst); return { exit: 1, quiet: true };
      case 'V': out(`Version: ${PERFTEST_VERSION}\n`); return { exit: 1, quiet: true };
      default:
        getoptComplaint(prog, item, OPTSTRING);
        return invalid();
    }
    if (v === null) return bad();
  }
  const rest = g.operands;
  if (rest.length > 1) return invalid();
  p.servername = rest[0] ?? null;
  if (p.all && p.duration > 0) {
    out('---------------------------------------------------------------------------------------\n');
    errOut("Duration mode currently doesn't support running on all sizes.\n");
    return { exit: 1, quiet: true };
  }
  forceDependencies(p);
  if (p.verb === Verb.ATOMIC && p.size !== 8) {
    out('---------------------------------------------------------------------------------------\n');
    out('Message size cannot be changed for Atomic tests \n');
    return { exit: 1, quiet: true };
  }
  return { params: p };
}
