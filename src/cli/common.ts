/**
 * What rdma-core's `librdmacm/examples/common.c` gives its tools, and what cmatose, udaddy and
 * mckey each repeat: rdma_getaddrinfo of a source and a destination ({@link getRdmaAddr}), the
 * first event channel, the size and count formats of the stream tools' tables and their byte
 * pattern, and the connect/disconnect event loop, node allocation and `-f` of the cmatose family.
 */
// The APIs only, no transport: each tool loads the transports it uses (src/cli/rdma.ts or the
// package entry point), so that `rstream -T s` loads none.
import {
  RAI,
  createEventChannel,
  createId,
  gaiStrerror,
  getaddrinfo,
  type CmEvent,
  type CmId,
  type EventChannel,
  type PortSpace,
  type RdmaAddrinfo,
  type RdmaAddrinfoHints,
  getDeviceList,
  Errno,
} from './api.js';
import { errOut, errnoFrom, out, perror } from './c-compat.js';
import { eaiOf } from './addresses.js';

// -- table formats and the byte pattern ----------------------------------------------------------

/**
 * common.c `size_str()`: a byte count with k/m/g suffixes (powers of 1024); one decimal digit is
 * shown when the integer part is below 10 and the digit is non-zero (1536 → "1.5k", 4096 → "4k",
 * 1000 → "1000").
 */
export function sizeStr(size: number): string {
  let base = 1;
  let mag = '';
  if (size >= 2 ** 30) {
    base = 2 ** 30;
    mag = 'g';
  } else if (size >= 2 ** 20) {
    base = 2 ** 20;
    mag = 'm';
  } else if (size >= 2 ** 10) {
    base = 2 ** 10;
    mag = 'k';
  }
  const whole = Math.trunc(size / base);
  let fraction = 0;
  if (whole < 10) fraction = Math.trunc(((size % base) * 10) / base);
  return fraction ? `${whole}.${fraction}${mag}` : `${whole}${mag}`;
}

/** common.c `cnt_str()`: decimal units b/m/k (10^9, 10^6, 10^3), integer division. */
export function cntStr(cnt: number): string {
  if (cnt >= 1_000_000_000) return `${Math.trunc(cnt / 1_000_000_000)}b`;
  if (cnt >= 1_000_000) return `${Math.trunc(cnt / 1_000_000)}m`;
  if (cnt >= 1000) return `${Math.trunc(cnt / 1000)}k`;
  return `${cnt}`;
}

/** common.c `size_to_count()`: default iteration count for a transfer size. */
export function sizeToCount(size: number): number {
  if (size >= 1 << 20) return 100;
  if (size >= 1 << 16) return 1000;
  if (size >= 1 << 10) return 10000;
  return 100000;
}

/**
 * The running byte pattern of common.c `format_buf()` / `verify_buf()`: 0, 1, ..., 255, 0, ...
 * continuing across calls. Keep one instance per direction (the C code uses static counters).
 */
export class BytePattern {
  private fmtNext = 0;
  private verifyNext = 0;
  private verified = 0;

  /** Fill `buf` with the next bytes of the pattern. */
  format(buf: Uint8Array): void {
    for (let i = 0; i < buf.length; i++) {
      buf[i] = this.fmtNext;
      this.fmtNext = (this.fmtNext + 1) & 0xff;
    }
  }

  /**
   * Check `buf` against the pattern. On the first mismatch prints
   * `data verification failed byte <n>` (stdout; n = running byte index) and returns -1.
   */
  verify(buf: Uint8Array): number {
    for (let i = 0; i < buf.length; i++, this.verified++) {
      if (buf[i] !== this.verifyNext) {
        out(`data verification failed byte ${this.verified}\n`);
        return -1;
      }
      this.verifyNext = (this.verifyNext + 1) & 0xff;
    }
    return 0;
  }
}

// -- CM calls -------------------------------------------------------------------------------------

/**
 * common.c `get_rdma_addr()`: passive (`hints.flags & RAI.PASSIVE`) resolves `src`; active
 * resolves `src` first as a passive address (its result becomes the source) and then `dst`.
 * Failure prints `rdma_getaddrinfo error: <gai_strerror>` (stdout) and returns the EAI code
 * (or -1 for an errno-style failure), as `rdma_getaddrinfo` does.
 */
export async function getRdmaAddr(
  src: string | null,
  dst: string | null,
  port: string,
  hints: RdmaAddrinfoHints,
): Promise<{ ret: number; rai: RdmaAddrinfo | null }> {
  let ret = 0;
  let rai: RdmaAddrinfo | null = null;
  try {
    if ((hints.flags ?? 0) & RAI.PASSIVE) {
      rai = await getaddrinfo(src, port, hints);
    } else {
      const h: RdmaAddrinfoHints = { ...hints };
      if (src !== null) {
        const res = await getaddrinfo(src, null, { ...h, flags: (h.flags ?? 0) | RAI.PASSIVE });
        if (res.srcAddr) h.srcAddr = res.srcAddr;
      }
      rai = await getaddrinfo(dst, port, h);
    }
  } catch (e) {
    ret = eaiOf(e);
    rai = null;
  }
  if (ret) out(`rdma_getaddrinfo error: ${gaiStrerror(ret)}\n`);
  return { ret, rai };
}

/**
 * common.c `create_first_event_channel()`: an event channel, or null after printing
 * `No RDMA devices were detected` (no device: ENODEV) or
 * `failed to create RDMA CM event channel: <strerror>`. The errno is in `result.errno`.
 */
export function createFirstEventChannel(): { channel: EventChannel | null; errno: number } {
  let ndev = 0;
  try {
    ndev = getDeviceList().length;
  } catch (e) {
    perror('failed to create RDMA CM event channel', e);
    return { channel: null, errno: errnoFrom(e) };
  }
  if (ndev === 0) {
    errOut('No RDMA devices were detected\n');
    return { channel: null, errno: Errno.ENODEV };
  }
  try {
    return { channel: createEventChannel(), errno: 0 };
  } catch (e) {
    perror('failed to create RDMA CM event channel', e);
    return { channel: null, errno: errnoFrom(e) };
  }
}

// -- the cmatose family --------------------------------------------------------------------------

/**
 * The tools' `connect_events()` / `disconnect_events()`: while `left()` is non-zero and the last
 * handler returned 0, take the next event from `channel`, hand it to `handle`, then ack it. The
 * handler's last result is returned; a failing rdma_get_cm_event returns what `failed` makes of
 * the error.
 */
export async function cmEventLoop(
  channel: EventChannel,
  left: () => number,
  handle: (event: CmEvent) => Promise<number>,
  failed: (e: unknown) => number,
): Promise<number> {
  let ret = 0;
  while (left() && !ret) {
    let event: CmEvent;
    try {
      event = await channel.getEvent();
    } catch (e) {
      return failed(e);
    }
    ret = await handle(event);
    event.ack();
  }
  return ret;
}

/**
 * The `alloc_nodes()` of cmatose, udaddy and mckey: `count` nodes made by `make(i)`, each given
 * an id on `channel` (its context the node) unless `ps` is null (a server's nodes get theirs from
 * the requests). A negative count fails as its malloc would (`<prog>: unable to allocate memory
 * for test nodes`, -ENOMEM); a failing rdma_create_id destroys the ids made so far (-errno).
 */
export function allocCmNodes<N extends { cmaId: CmId | null }>(
  prog: string,
  count: number,
  make: (i: number) => N,
  channel: EventChannel | null,
  ps: PortSpace | null,
): { nodes: N[]; ret: number } {
  const nodes: N[] = [];
  if (count < 0) {
    // malloc(sizeof *nodes * connections) of a negative count fails.
    out(`${prog}: unable to allocate memory for test nodes\n`);
    return { nodes, ret: -Errno.ENOMEM };
  }
  for (let i = 0; i < count; i++) {
    const node = make(i);
    nodes.push(node);
    if (ps === null) continue;
    try {
      node.cmaId = createId(channel, node, ps);
    } catch (e) {
      for (const n of nodes) void n.cmaId?.destroy().catch(() => {});
      return { nodes, ret: -errnoFrom(e) };
    }
  }
  return { nodes, ret: 0 };
}

/** strncasecmp(word, arg, n) == 0: `arg` starts with the first `n` letters of `word`. */
export function prefixIs(arg: string, word: string, n: number): boolean {
  return arg.slice(0, n).toLowerCase() === word.slice(0, n) && arg.length >= Math.min(n, word.length);
}

/**
 * `-f address_format` of cmatose and udaddy: `ip` (or `ipv6`) makes the addresses numeric, `gid`
 * numeric AF_IB ones, `name` is the default; another word warns on stderr and changes nothing.
 */
export function addressFormatArg(arg: string, hints: RdmaAddrinfoHints): void {
  if (prefixIs(arg, 'ip', 2)) hints.flags = RAI.NUMERICHOST;
  else if (prefixIs(arg, 'gid', 3)) {
    hints.flags = RAI.NUMERICHOST | RAI.FAMILY;
    hints.family = 'IB';
  } else if (!prefixIs(arg, 'name', 4)) errOut('Warning: unknown address format\n');
}
