/**
 * The parts of libibverbs' pingpong examples that rc/uc/ud/srq_pingpong.c each write out again:
 * the long options and the head of the usage text, the "try a step, print its message" pattern of
 * pp_init_ctx / pp_close_ctx, the address handle built from the peer's address, and the ping-pong
 * loop itself (a SEND each way per exchange, receives refilled when they run low). What differs
 * between the tools is passed in; messages and exit statuses are the C tools'.
 */
import { WcStatus, wcStatusStr, type AhAttr, type CompChannel, type Cq, type Wc } from './api.js';
import { errOut } from './c-compat.js';
import type { LongOption } from './getopt.js';
import { PP_RECV_WRID, PP_SEND_WRID, ppNextCompletions } from './pingpong.js';
import { gidHasInterfaceId, type PpDest } from './pingpong-wire.js';

/** Every long option of the pingpong tools, by its short letter (the tools' `long_options[]`). */
const LONG_BY_LETTER: Readonly<Record<string, LongOption>> = {
  p: { name: 'port', hasArg: true, val: 'p' },
  d: { name: 'ib-dev', hasArg: true, val: 'd' },
  i: { name: 'ib-port', hasArg: true, val: 'i' },
  s: { name: 'size', hasArg: true, val: 's' },
  m: { name: 'mtu', hasArg: true, val: 'm' },
  q: { name: 'num-qp', hasArg: true, val: 'q' },
  r: { name: 'rx-depth', hasArg: true, val: 'r' },
  n: { name: 'iters', hasArg: true, val: 'n' },
  l: { name: 'sl', hasArg: true, val: 'l' },
  e: { name: 'events', hasArg: false, val: 'e' },
  g: { name: 'gid-idx', hasArg: true, val: 'g' },
  o: { name: 'odp', hasArg: false, val: 'o' },
  O: { name: 'iodp', hasArg: false, val: 'O' },
  P: { name: 'prefetch', hasArg: false, val: 'P' },
  t: { name: 'ts', hasArg: false, val: 't' },
  c: { name: 'chk', hasArg: false, val: 'c' },
  j: { name: 'dm', hasArg: false, val: 'j' },
  N: { name: 'new_send', hasArg: false, val: 'N' },
};

/** The long options of a tool whose getopt string is `optstring`, in its order. */
export function ppLongOptions(optstring: string): LongOption[] {
  const out: LongOption[] = [];
  for (const ch of optstring.replace(/:/g, '')) {
    const o = LONG_BY_LETTER[ch];
    if (o === undefined) throw new Error(`no long option for -${ch}`);
    out.push(o);
  }
  return out;
}

/** The usage text's head, the same in every pingpong tool. */
export function ppUsageHead(argv0: string): string[] {
  return [
    'Usage:',
    `  ${argv0}            start a server and wait for connection`,
    `  ${argv0} <host>     connect to server at <host>`,
    '',
    'Options:',
    '  -p, --port=<port>      listen on/connect to port <port> (default 18515)',
    '  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)',
    '  -i, --ib-port=<port>   use port <port> of IB device (default 1)',
  ];
}

/** Run `f`; if it throws, print `msg` (stderr) and return null, as the C tools' `if (!x) { fprintf; goto }`. */
export function ppStep<T>(f: () => T, msg: string): T | null {
  try {
    return f();
  } catch {
    errOut(`${msg}\n`);
    return null;
  }
}

/** pp_close_ctx: each step in order; false after the first that fails (its message printed). */
export function ppClose(steps: readonly (readonly [() => unknown, string])[]): boolean {
  for (const [f, msg] of steps) if (ppStep(f, msg) === null) return false;
  return true;
}

/**
 * The address of the peer as pp_connect_ctx builds it: with a GRH to `gid` when the peer sent a
 * GID with an interface id (RoCE, or IB with `-g`), else by LID alone.
 */
export function ppAhAttr(dest: PpDest, gid: Uint8Array, sl: number, portNum: number, sgidIndex: number): AhAttr {
  return gidHasInterfaceId(gid)
    ? { isGlobal: true, dlid: dest.lid, sl, srcPathBits: 0, portNum, grh: { dgid: gid, flowLabel: 0, sgidIndex, hopLimit: 1, trafficClass: 0 } }
    : { isGlobal: false, dlid: dest.lid, sl, srcPathBits: 0, portNum };
}

/** What the ping-pong loop of one tool needs. */
export interface PpLoop {
  cq: Cq;
  channel: CompChannel | null;
  /** Completions polled at once. */
  maxWc: number;
  /** Exchanges (`-n`): SENDs completed and receives completed each reach it. */
  iters: number;
  rxDepth: number;
  /** Receives outstanding when the loop starts. */
  routs: number;
  /** Receives are refilled to `rxDepth` once at most this many are left. */
  refillAt: number;
  /** The QPs whose SENDs alternate with their receives (one, or srq_pingpong's `-q`). */
  pending: number[];
  /** Post `n` receives: how many were. */
  postRecv(n: number): number;
  /** Post the SEND of QP `qi` (printing why not): false if it failed. */
  postSend(qi: number): boolean;
  /** The QP index of a completion: null after printing why (srq_pingpong's unknown QPN). */
  qpIndex(wc: Wc): number | null;
  /** A line printed after a failed completion's (rc_pingpong's "parse WC failed"). */
  failedTail?(wcs: readonly Wc[]): string;
}

/** The ping-pong loop of main(): true when every exchange completed, false after printing why. */
export async function ppPingpong(l: PpLoop): Promise<boolean> {
  let rcnt = 0;
  let scnt = 0;
  let routs = l.routs;
  while (rcnt < l.iters || scnt < l.iters) {
    let wcs: Wc[];
    try {
      wcs = await ppNextCompletions(l.cq, l.channel, l.maxWc);
    } catch {
      errOut('Failed to get cq_event\n');
      return false;
    }
    for (const wc of wcs) {
      if (wc.status !== WcStatus.SUCCESS) {
        errOut(`Failed status ${wcStatusStr(wc.status)} (${wc.status}) for wr_id ${Number(wc.wrId)}\n`);
        if (l.failedTail) errOut(l.failedTail(wcs));
        return false;
      }
      const qi = l.qpIndex(wc);
      if (qi === null) return false;
      const id = Number(wc.wrId);
      if (id === PP_SEND_WRID) ++scnt;
      else if (id === PP_RECV_WRID) {
        if (--routs <= l.refillAt) {
          routs += l.postRecv(l.rxDepth - routs);
          if (routs < l.rxDepth) {
            errOut(`Couldn't post receive (${routs})\n`);
            return false;
          }
        }
        ++rcnt;
      } else {
        errOut(`Completion for unknown wr_id ${id}\n`);
        return false;
      }
      l.pending[qi] = (l.pending[qi] as number) & ~id;
      if (scnt < l.iters && l.pending[qi] === 0) {
        if (!l.postSend(qi)) return false;
        l.pending[qi] = PP_RECV_WRID | PP_SEND_WRID;
      }
    }
  }
  return true;
}
