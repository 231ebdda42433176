/**
 * Fault injection on the soft iWARP device: what the FPDUs a connection sends meet on their way
 * to TCP, for testing applications against a slow, stalling or failing peer. Off unless
 * configured, by `RDMACM_IWARP_FAULTS="latency=5,stall=300,stall_at=20,seed=7"` or
 * {@link configureIwarpFaults}; the keys read as the soft RoCE device's (impair.ts) where they
 * mean the same, and docs/faults.md is the users' description.
 *
 * The configuration is the process's; what it does counts per connection: FPDU numbers start at
 * 1 with the first FPDU a connection sends in RDMA mode (the zero-length RTR of peer-to-peer mode
 * included; the MPA Request and Reply are not FPDUs). Per FPDU, in order:
 *
 * - `reset=K`: when FPDU K is about to be written, the TCP connection is reset
 *   (`socket.resetAndDestroy()`: RST, nothing after it is sent); the QP goes to ERR, like a
 *   connection the peer reset (`inject_reset`).
 * - `stall=MS`, `stall_at=K` (default 1), `stall_every=M` (default 0: once): before FPDU K, and
 *   K + M, K + 2M … when M > 0, the connection sends nothing for MS ms from the moment that
 *   FPDU's turn comes (after what is held before it); what is posted meanwhile waits, in order
 *   (`inject_stall`).
 * - `latency=MS`, `jitter=MS`: each FPDU is written `latency` plus a random time up to `jitter`
 *   ms after the QP handed it over, never before the FPDU before it (order kept, as TCP's)
 *   (`inject_delay`).
 * - `crc=K`, `corrupt=P`: FPDU K, and each FPDU with probability P, goes out with its MPA CRC
 *   wrong (one bit flipped). Only where the connection uses MPA CRC: with one of these keys set,
 *   an initiator of this process asks for CRC (as `RDMACM_IWARP_CRC=1` does), and a responder
 *   uses it when its initiator asked. The peer answers as siw does: a TERMINATE (LLP layer, MPA
 *   CRC error) and its QP to ERR (`inject_crc`).
 *
 * `seed=S` makes the random choices (corrupt, jitter) repeatable. The counters are the device's
 * (counters.ts); {@link iwarpFaultCounts} sums them over the process.
 */
import { DelayLine, checkFaults, faultPrng, faultsFromEnv, parseFaultSpec, type FaultKeys } from '../../util/fault-spec.js';
import { MPA_CRC_LEN, MPA_LEN_FIELD, fpduLength } from '../../wire/iwarp/index.js';
import { IC, type IwarpCounters } from './counters.js';

/** The faults of the soft iWARP device. */
export interface IwarpFaults {
  /** Every FPDU is written this much later (ms), order kept. */
  latencyMs: number;
  /** A random extra delay of each FPDU, up to this (ms), order kept. */
  jitterMs: number;
  /** Length of a stall (ms; 0: none). */
  stallMs: number;
  /** The number of the FPDU before which the first stall starts (default 1). */
  stallAt: number;
  /** A stall again every this many FPDUs after {@link stallAt} (0: once). */
  stallEvery: number;
  /** Reset the connection when this FPDU is about to be written (0: never). */
  reset: number;
  /** This FPDU goes out with a wrong MPA CRC (0: none). */
  crc: number;
  /** Probability that an FPDU goes out with a wrong MPA CRC. */
  corrupt: number;
  /** Seed of the pseudo-random sequence (0: from the clock). */
  seed: number;
}

/** API name → [name in RDMACM_IWARP_FAULTS, kind]. */
const KEYS: FaultKeys<IwarpFaults> = {
  latencyMs: ['latency', 'ms'],
  jitterMs: ['jitter', 'ms'],
  stallMs: ['stall', 'ms'],
  stallAt: ['stall_at', 'count'],
  stallEvery: ['stall_every', 'count'],
  reset: ['reset', 'count'],
  crc: ['crc', 'count'],
  corrupt: ['corrupt', 'prob'],
  seed: ['seed', 'seed'],
};

/** What the faults did in this process (every device, every connection). */
export interface IwarpFaultCounts {
  delayed: number;
  stalled: number;
  reset: number;
  crc: number;
}

const ZERO: IwarpFaultCounts = { delayed: 0, stalled: 0, reset: 0, crc: 0 };

let active: { cfg: IwarpFaults; rand: () => number } | null = null;
let counts: IwarpFaultCounts = { ...ZERO };

/**
 * Inject these faults into every connection the soft iWARP devices of this process set up from
 * now on (`null`: none; connections already in RDMA mode keep what they had). The counts of
 * {@link iwarpFaultCounts} start again from zero.
 * @throws RdmaError EINVAL for an unknown key, a probability outside [0, 1], a negative or
 *   non-numeric duration, an FPDU number, period or seed that is not a whole number.
 */
export function configureIwarpFaults(cfg: Partial<IwarpFaults> | null): void {
  if (cfg === null) {
    active = null;
    return;
  }
  checkFaults(cfg, KEYS, 'configureIwarpFaults');
  const c: IwarpFaults = { latencyMs: 0, jitterMs: 0, stallMs: 0, stallAt: 1, stallEvery: 0, reset: 0, crc: 0, corrupt: 0, seed: 0, ...cfg };
  active = { cfg: c, rand: faultPrng(c.seed) };
  counts = { ...ZERO };
}

/** Parse the text of `RDMACM_IWARP_FAULTS` (`key=value,...`); errors name `op`. */
export function parseIwarpFaults(text: string, op = 'RDMACM_IWARP_FAULTS'): Partial<IwarpFaults> {
  return parseFaultSpec<IwarpFaults>(text, KEYS, op);
}

/** What the faults did in this process since they were configured. */
export function iwarpFaultCounts(): IwarpFaultCounts {
  return { ...counts };
}

faultsFromEnv('RDMACM_IWARP_FAULTS', (text, op) => configureIwarpFaults(parseIwarpFaults(text, op)));

/** Whether an initiator should ask for MPA CRC: a CRC fault is configured. */
export function iwarpFaultsWantCrc(): boolean {
  return active !== null && (active.cfg.crc > 0 || active.cfg.corrupt > 0);
}

/** What a connection's fault injector does to its socket. */
export interface FaultSink {
  /** Write bytes to the socket now. */
  write(b: Uint8Array, cb?: (err?: Error | null) => void): void;
  /** Reset the connection (RST) now. */
  reset(): void;
}

/** One deferred piece of the stream: bytes and their write callback, or the reset. */
type Piece = { b: Uint8Array; cb: ((err?: Error | null) => void) | undefined } | null;

/**
 * The faults of one connection in RDMA mode: it follows the MPA framing of what the QP writes
 * (RFC 5044 §4: a 2-byte ULPDU length, the ULPDU, pad to 4, the CRC), numbers the FPDUs and
 * applies the configuration to each. Bytes that are held are copied (the TX path reuses its
 * staging buffer once the socket has taken a write).
 */
export class FpduFaults {
  private readonly cfg: IwarpFaults;
  private readonly rand: () => number;
  private readonly line: DelayLine<Piece>;
  /** FPDUs begun. */
  private n = 0;
  /** Bytes of the current FPDU still to come (0: the next byte starts an FPDU). */
  private left = 0;
  /** The current FPDU's CRC is to be spoiled. */
  private spoil = false;
  /** The high byte of a length field split across two writes, or -1. */
  private lenHi = -1;
  /** The connection was reset: nothing more is written. */
  private dead = false;
  /** Called once nothing is held any more (see {@link whenEmpty}). */
  private emptied: (() => void) | null = null;

  /**
   * `crc`: the connection uses MPA CRC (a CRC fault has something to spoil); `ctr`: the device's
   * counters.
   */
  constructor(
    private readonly sink: FaultSink,
    private readonly crcOn: boolean,
    private readonly ctr: IwarpCounters,
  ) {
    const a = active as { cfg: IwarpFaults; rand: () => number };
    this.cfg = a.cfg;
    this.rand = a.rand;
    this.line = new DelayLine<Piece>((p) => this.release(p), false);
  }

  /** A fault injector for a new connection, or null when no faults are configured. */
  static forConnection(sink: FaultSink, crc: boolean, ctr: IwarpCounters): FpduFaults | null {
    return active === null ? null : new FpduFaults(sink, crc, ctr);
  }

  /** Whether bytes are held. */
  get holding(): boolean {
    return this.line.size > 0;
  }

  /** Run `fn` once nothing is held (now, if nothing is). */
  whenEmpty(fn: () => void): void {
    if (this.line.size === 0) fn();
    else this.emptied = fn;
  }

  /**
   * The connection is gone: the held writes' callbacks get `e` (a zero-copy message completes
   * flushed), nothing more is written.
   */
  drop(e: Error): void {
    this.dead = true;
    this.emptied = null;
    for (const p of this.line.clear()) p?.cb?.(e);
  }

  /** Write `buf` through the faults (the LLP's write). */
  write(buf: Uint8Array, cb?: (err?: Error | null) => void): void {
    if (this.dead) {
      cb?.(new Error('connection reset'));
      return;
    }
    let from = 0;
    let at = 0;
    while (at < buf.length) {
      if (this.left === 0 && this.lenHi < 0) {
        // An FPDU starts here: what came before goes on its way, then this one's faults.
        if (at > from) this.out(buf.subarray(from, at));
        from = at;
        if (this.begin()) {
          // reset: what came before is written (or queued), then the RST, and nothing else.
          this.dead = true;
          if (this.line.size > 0) this.line.push(null, 0);
          else this.resetNow();
          cb?.(new Error('connection reset'));
          return;
        }
      }
      if (this.left === 0) {
        // The 2-byte ULPDU length: both bytes in this write, or the first one only.
        if (this.lenHi >= 0) {
          this.left = fpduLength((this.lenHi << 8) | (buf[at] as number)) - 1;
          this.lenHi = -1;
        } else if (at + MPA_LEN_FIELD <= buf.length) {
          this.left = fpduLength(((buf[at] as number) << 8) | (buf[at + 1] as number));
        } else {
          this.lenHi = buf[at] as number;
          at++;
          continue;
        }
      }
      const take = Math.min(this.left, buf.length - at);
      const crcAt = at + this.left - MPA_CRC_LEN;
      if (this.spoil && crcAt >= at && crcAt < at + take) {
        // The CRC's first byte is in this write: one bit of it flipped, on a copy.
        this.out(buf.subarray(from, crcAt));
        this.out(Buffer.of((buf[crcAt] as number) ^ 1), undefined, true);
        from = crcAt + 1;
        this.spoil = false;
      }
      this.left -= take;
      at += take;
    }
    this.out(buf.subarray(from, at), cb);
  }

  /** An FPDU begins: count it and decide its faults. Returns true when it is the reset one. */
  private begin(): boolean {
    const c = this.cfg;
    const k = ++this.n;
    if (c.reset > 0 && k === c.reset) {
      counts.reset++;
      this.ctr.add(IC.inject_reset);
      return true;
    }
    if (c.stallMs > 0 && (k === c.stallAt || (c.stallEvery > 0 && k > c.stallAt && (k - c.stallAt) % c.stallEvery === 0))) {
      counts.stalled++;
      this.ctr.add(IC.inject_stall);
      this.stalledUntil = this.line.holdFor(c.stallMs);
    }
    this.spoil = this.crcOn && ((c.crc > 0 && k === c.crc) || (c.corrupt > 0 && this.rand() < c.corrupt));
    if (this.spoil) {
      counts.crc++;
      this.ctr.add(IC.inject_crc);
    }
    if (c.latencyMs + c.jitterMs > 0) {
      counts.delayed++;
      this.ctr.add(IC.inject_delay);
      this.nextDelay = c.latencyMs + (c.jitterMs > 0 ? this.rand() * c.jitterMs : 0);
    }
    return false;
  }
  /** The end of the last stall (performance.now()). */
  private stalledUntil = -Infinity;
  /** The delay of the current FPDU's first piece not yet handed on (ms). */
  private nextDelay = 0;

  /**
   * Write or queue a piece of the stream (the first piece of an FPDU carries its delay): straight
   * to the socket when nothing is held, no stall runs and no delay is due; `owned`: `b` is ours
   * already (else a held piece is copied).
   */
  private out(b: Uint8Array, cb?: (err?: Error | null) => void, owned = false): void {
    if (b.length === 0 && cb === undefined) return;
    const d = this.nextDelay;
    this.nextDelay = 0;
    if (d === 0 && this.line.size === 0 && performance.now() >= this.stalledUntil) {
      this.sink.write(b, cb);
      return;
    }
    this.line.push({ b: owned ? b : Buffer.from(b), cb }, d);
  }

  private release(p: Piece): void {
    if (p === null) this.resetNow();
    else if (p.b.length === 0) p.cb?.(null);
    else this.sink.write(p.b, p.cb);
    if (this.line.size === 0 && this.emptied !== null) {
      const f = this.emptied;
      this.emptied = null;
      f();
    }
  }

  private resetDone = false;
  private resetNow(): void {
    if (this.resetDone) return;
    this.resetDone = true;
    this.sink.reset();
  }
}
