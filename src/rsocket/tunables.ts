/**
 * The rsocket's tunables: the sizes a socket is configured with ({@link RsConfig}, set through
 * socket options and inherited from a listener) and the library-wide choices read once from the
 * environment (`RDMACM_RS_*`, see docs/config.md).
 */
import { RS_SNDLOWAT, RS_QP_CTRL_SIZE } from './protocol.js';
import { RS_DEFAULTS } from './options.js';
import { envInt } from '../util/env.js';

/**
 * Largest chunk (one RDMA WRITE + its DATA message) of a send call. rsocket.c starts each call at
 * 2 KiB and doubles up to RS_MAX_TRANSFER (64 KiB), overlapping the first small write with the
 * copy of the rest. The chunk size is the sender's choice — the receiver only sees the length in
 * the DATA message, and each chunk stays within one target SGE either way — and over the software
 * device every work request costs TCP writes, so ours send up to 512 KiB per chunk from the start.
 * `RDMACM_RS_MAX_XFER=<bytes>` and `RDMACM_RS_RAMP=1` restore rsocket.c's behaviour.
 */
export const MAX_XFER = Math.max(RS_SNDLOWAT, envInt('RDMACM_RS_MAX_XFER', 512 * 1024) || 512 * 1024);
export const RAMP = process.env['RDMACM_RS_RAMP'] === '1';
/**
 * Largest chunk (one RDMA WRITE) of a riowrite call. No message follows it and no target SGE
 * bounds it, so nothing on the peer's side waits for a chunk to end: one WRITE (and one writev)
 * per MiB instead of two costs less per byte. Bounded by the free send buffer as any chunk.
 * `RDMACM_RS_RIO_MAX_XFER=<bytes>` changes it; `RDMACM_RS_RAMP=1` restores rsocket.c's ramp.
 */
export const RIO_MAX_XFER = Math.max(RS_SNDLOWAT, envInt('RDMACM_RS_RIO_MAX_XFER', 1 << 20));
/**
 * rsend copies ahead into the send buffer while the peer has granted no target space (see
 * early.ts); `RDMACM_RS_EARLY=0` restores rsocket.c's behaviour (EAGAIN until a grant).
 */
export const EARLY_STAGING = process.env['RDMACM_RS_EARLY'] !== '0';
/**
 * Receives posted beyond the advertised credits. Credits bound the DATA messages in flight;
 * SGL and CTRL messages are not credited (rsocket relies on RNR retry, which iWARP lacks), so
 * a few spare receives absorb a burst of them. Invisible on the wire.
 */
export const EXTRA_RECVS = 2 * RS_QP_CTRL_SIZE + 2;
/**
 * The part of a large send buffer used as the ring on iWARP (RS_OPT_MSG_SEND). There an RDMA
 * WRITE completes as soon as TCP has taken its bytes, so the ring only holds what waits for room
 * in TCP's socket buffer; a ring larger than this buys no throughput, while every byte sent
 * cycles through it (rsend's copy in, the kernel's copy out), and a ring beyond the CPU cache
 * makes both copies miss. On InfiniBand / RoCE a WRITE completes when the peer acknowledges it:
 * the ring covers the bytes in flight and is used whole. SO_SNDBUF still reports the size set;
 * `RDMACM_RS_SBUF_SPAN=<bytes>` changes the span, 0 uses the whole buffer.
 */
export const SBUF_SPAN = envInt('RDMACM_RS_SBUF_SPAN', 1 << 20);
/**
 * Data chunks at least this large are posted at once, each RDMA WRITE followed directly by its
 * DATA message, instead of joining the batch that posts every queued WRITE before the messages.
 * The receiver learns of a chunk only from its message: behind a batch of large WRITEs it would
 * see none of them until the last had arrived, and so copy out and grant the first half of its
 * buffer only after the second half had arrived too (the sender then waited for the whole
 * window each time). A large WRITE goes to TCP as a writev of its own either way, so posting it
 * alone costs no extra write. `RDMACM_RS_POST_ALONE=<bytes>` changes the size.
 */
export const POST_ALONE_MIN = envInt('RDMACM_RS_POST_ALONE', 32 * 1024);
/**
 * rpoll's busy-poll, in µs (rsocket.c's `polling_time`, 10 by default, set there by
 * /etc/rdma/rsocket/polling_time): `RDMACM_RS_POLLING_TIME=<µs>`, 0 to sleep at once.
 */
export const POLLING_TIME = envInt('RDMACM_RS_POLLING_TIME', RS_DEFAULTS.pollingTime, 1_000_000);
/** Default keepalive interval when TCP_KEEPIDLE is not set (Linux tcp_keepalive_time). */
export const KEEPALIVE_DEFAULT_S = 7200;

/** Buffer and queue sizes, inherited by accepted sockets from their listener (rs_alloc). */
export interface RsConfig {
  /** Send buffer bytes (SO_SNDBUF value × 2). */
  sbufSize: number;
  /** Receive buffer bytes (SO_RCVBUF value × 2); the peer sees two halves. */
  rbufSize: number;
  /** Inline data limit (RDMA_INLINE); raised to 4 on iWARP, capped at the device limit. */
  sqInline: number;
  /** Send queue size (RDMA_SQSIZE). */
  sqSize: number;
  /** Receive queue size and receive credits (RDMA_RQSIZE). */
  rqSize: number;
  /** iomap table entries the peer may fill (RDMA_IOMAPSIZE, rounded). */
  targetIomapSize: number;
  /**
   * Microseconds a {@link RsConn.poll} that has to wait keeps the event loop polling before it
   * lets it sleep (rsocket.c's `polling_time`; 0: sleep at once). Default 10, or
   * `RDMACM_RS_POLLING_TIME`.
   */
  pollingTime: number;
}

/** The library defaults as an {@link RsConfig}. */
export function defaultConfig(): RsConfig {
  return fullConfig();
}

/**
 * `cfg`'s fields over the library defaults, built in this one literal: every socket's
 * configuration then has one hidden class. (It was an object spread, whose copy takes its hidden
 * class from its sources': the connection rstream opens for its bandwidth tests found another one
 * than its latency connection had, and the data path compiled for that was thrown away.)
 */
export function fullConfig(cfg?: Partial<RsConfig>): RsConfig {
  return {
    sbufSize: cfg?.sbufSize ?? RS_DEFAULTS.wmem,
    rbufSize: cfg?.rbufSize ?? RS_DEFAULTS.mem,
    sqInline: cfg?.sqInline ?? RS_DEFAULTS.inline,
    sqSize: cfg?.sqSize ?? RS_DEFAULTS.sqSize,
    rqSize: cfg?.rqSize ?? RS_DEFAULTS.rqSize,
    targetIomapSize: cfg?.targetIomapSize ?? RS_DEFAULTS.iomapSize,
    pollingTime: cfg?.pollingTime ?? POLLING_TIME,
  };
}
