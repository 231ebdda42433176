/**
 * perftest's side channel over rdma_cm, which `-R` selects (perftest_parameters.c: `-R` sets
 * `use_rdma_cm`; perftest_communication.c `rdma_client_connect`, `rdma_server_connect`,
 * `rdma_write_data`, `rdma_read_data`, `rdma_write_keys`, `rdma_read_keys`): an RC connection of
 * its own on the test's port (RDMA_PS_TCP), one receive of `sizeof(struct pingpong_dest)` always
 * posted, each record one SEND. The records are those of the TCP channel but for the keys, which
 * travel as the binary `struct pingpong_dest` (big-endian fields, {@link encodeDestBinary}), and
 * the close, which is the last key exchange alone. The server's listening id is destroyed once the
 * control connection is accepted, so the test's own rdma_cm connection can listen on the port.
 */
import { Access, PortSpace, WcStatus, WrOpcode, SendFlags, createId, type CmId, type CompChannel, type Context, type Cq, type Mr, type Qp } from '../api.js';
import { ExchangeError, type PerfDest } from './exchange.js';
import { peerDisconnected } from './cm.js';

/** `sizeof(struct pingpong_dest)` on LP64: five ints, padding, a u64, the GID, two ints. */
export const PINGPONG_DEST_SIZE = 56;
/** `SYNC_SPEC_ID`: the work request id of the channel's SENDs and receives. */
const SYNC_SPEC_ID = 5;
/** `DEF_PAGE_SIZE`: the channel's buffer (`buff_size = cycle_buffer`). */
const BUF_SIZE = 4096;
const RESOLVE_TIMEOUT_MS = 2000;
/** `NUM_OF_RETRIES` of rdma_client_connect's address and route resolution. */
const NUM_OF_RETRIES = 10;

/** `rdma_write_keys`' record: the struct with its fields big-endian (`HAVE_ENDIAN`). */
export function encodeDestBinary(d: PerfDest, gidIndex: number): Buffer {
  const b = Buffer.alloc(PINGPONG_DEST_SIZE);
  b.writeInt32BE(d.lid | 0, 0);
  b.writeInt32BE(d.outReads | 0, 4);
  b.writeInt32BE(d.qpn | 0, 8);
  b.writeInt32BE(d.psn | 0, 12);
  b.writeUInt32BE(d.rkey >>> 0, 16);
  b.writeBigUInt64BE(BigInt.asUintN(64, d.vaddr), 24);
  Buffer.from(d.gid).copy(b, 32, 0, 16);
  b.writeUInt32BE(d.srqn >>> 0, 48);
  b.writeInt32BE(gidIndex | 0, 52);
  return b;
}

/** `rdma_read_keys`: the fields it takes (not the SRQ number nor the GID index). */
export function decodeDestBinary(b: Uint8Array): PerfDest {
  if (b.length < PINGPONG_DEST_SIZE) throw new ExchangeError("Couldn't read remote address");
  const v = Buffer.from(b.buffer, b.byteOffset, b.length);
  return {
    lid: v.readUInt32BE(0) & 0xffff,
    outReads: v.readInt32BE(4),
    qpn: v.readUInt32BE(8),
    psn: v.readUInt32BE(12),
    rkey: v.readUInt32BE(16),
    vaddr: v.readBigUInt64BE(24),
    gid: Uint8Array.from(v.subarray(32, 48)),
    srqn: 0,
  };
}

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

/** The rdma_cm side channel of one run. */
/**
 * The channel's connection parameters: perftest's rdma_client_connect / rdma_server_connect with
 * the channel's SEND parameters, a zeroed rdma_conn_param (no RDMA READ responder resources or
 * initiator depth: 0 and 0 in the REQ and REP, as a kernel rxe capture of perftest shows).
 */
const CHANNEL_CONN_PARAM = Object.freeze({ retryCount: 7, rnrRetryCount: 7, responderResources: 0, initiatorDepth: 0 });

export class CmChannel {
  private constructor(
    private readonly buf: Buffer,
    private readonly sendBuf: Buffer,
    private readonly id: CmId,
    private readonly qp: Qp,
    private readonly cq: Cq,
    private readonly ch: CompChannel,
    private readonly mr: Mr,
    private readonly sendMr: Mr,
    readonly isClient: boolean,
    private readonly timeoutMs: number,
  ) {}

  /** The channel's verbs objects on the id's device (`create_rdma_resources`, `ctx_init`). */
  private static make(id: CmId, isClient: boolean, timeoutMs: number): CmChannel {
    const ctx = id.verbs as Context;
    const ch = ctx.createCompChannel();
    const cq = ctx.createCq(4, ch);
    const pd = ctx.allocPd();
    const qp = id.createQp(pd, { sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: 1, maxSendSge: 1, maxRecvSge: 1 } });
    const buf = Buffer.alloc(BUF_SIZE);
    const sendBuf = Buffer.alloc(BUF_SIZE);
    const c = new CmChannel(buf, sendBuf, id, qp, cq, ch, pd.regMr(buf, Access.LOCAL_WRITE), pd.regMr(sendBuf, Access.LOCAL_WRITE), isClient, timeoutMs);
    c.postRecv();
    return c;
  }

  /** `rdma_client_connect`: resolve (retrying), make the QP, post the receive, connect. */
  static async connect(host: string, port: number, timeoutMs: number): Promise<CmChannel> {
    const id = createId(null, null, PortSpace.TCP);
    let tries = NUM_OF_RETRIES;
    for (;;) {
      try {
        await id.resolveAddr(null, { address: host, port }, RESOLVE_TIMEOUT_MS);
        break;
      } catch (e) {
        if (--tries <= 0) throw e;
      }
    }
    for (;;) {
      try {
        await id.resolveRoute(RESOLVE_TIMEOUT_MS);
        break;
      } catch (e) {
        if (--tries <= 0) throw e;
      }
    }
    const c = CmChannel.make(id, true, timeoutMs);
    await id.connect(CHANNEL_CONN_PARAM);
    return c;
  }

  /** `rdma_server_connect`: listen, take one request, make the QP, post the receive, accept, stop listening. */
  static async accept(port: number, timeoutMs: number, onListening: () => void = () => {}): Promise<CmChannel> {
    const listenId = createId(null, null, PortSpace.TCP);
    try {
      listenId.bindAddr({ address: '0.0.0.0', port });
      await listenId.listen(1);
      onListening();
      const id = await listenId.getRequest();
      const c = CmChannel.make(id, false, timeoutMs);
      await id.accept(CHANNEL_CONN_PARAM);
      return c;
    } finally {
      await listenId.destroy().catch(() => {});
    }
  }

  private postRecv(): void {
    this.qp.postRecv({ wrId: SYNC_SPEC_ID, sgList: [{ addr: this.mr.addr, length: PINGPONG_DEST_SIZE, lkey: this.mr.lkey }] });
  }

  /** One completion (polling, then waiting on the channel), within the read timeout. */
  private async completion(): Promise<{ status: number; opcode: number; byteLen: number }> {
    const end = Date.now() + this.timeoutMs;
    for (let spin = 0; ; spin++) {
      const w = this.cq.poll(1)[0];
      if (w) return w;
      if (Date.now() > end) throw new Error('timed out waiting for the peer');
      if (spin < 64) {
        await turn();
        continue;
      }
      this.cq.reqNotify();
      const again = this.cq.poll(1)[0];
      if (again) return again;
      const ac = new AbortController();
      const t = setTimeout(() => ac.abort(), 50);
      try {
        (await this.ch.getCqEvent(ac.signal)).ackEvents(1);
      } catch {
        // a slice without an event: look again
      } finally {
        clearTimeout(t);
      }
    }
  }

  /** `rdma_write_data`: one signaled SEND of `b`, waited for. */
  async write(b: Uint8Array): Promise<void> {
    Buffer.from(b).copy(this.sendBuf);
    this.qp.postSend({ wrId: SYNC_SPEC_ID, opcode: WrOpcode.SEND, sgList: [{ addr: this.sendMr.addr, length: b.length, lkey: this.sendMr.lkey }], sendFlags: SendFlags.SIGNALED });
    const wc = await this.completion();
    if (wc.status !== WcStatus.SUCCESS) throw new ExchangeError(` Bad wc status ${wc.status}`);
  }

  /** `rdma_read_data`: the next message's first `n` bytes; the receive is posted again. */
  async read(n: number): Promise<Buffer> {
    const wc = await this.completion();
    if (wc.status !== WcStatus.SUCCESS) throw new ExchangeError(`Bad wc status -- ${wc.status} -- ${SYNC_SPEC_ID} `);
    const b = Buffer.from(this.buf.subarray(0, n));
    this.postRecv();
    return b;
  }

  /** `ctx_xchg_data_rdma`: the client writes then reads, the server reads then writes. */
  async xchg(mine: Uint8Array, size = mine.length): Promise<Buffer> {
    if (this.isClient) {
      await this.write(mine);
      return this.read(size);
    }
    const rem = await this.read(size);
    await this.write(mine);
    return rem;
  }

  close(): void {
    void this.id.disconnect().catch(() => {});
  }

  /**
   * The client's close: first wait, at most `ms`, for the server to end the channel — the posted
   * receive completes, flushed (iWARP: the server's FIN errors the QP), or the id reports the
   * server's DISCONNECTED (read from the synchronous id's own event channel; RoCE: the server's
   * DREQ, which leaves the QP as it is) — so that the server's last SEND has completed on its
   * side before the connection drops: siw completes a SEND still going out when its connection
   * drops with IBV_WC_LOC_QP_OP_ERR, which perftest reports as "Bad wc status 2" and exits 1.
   * The server never waits for the client's side-channel close, so the two cannot wait for each
   * other.
   */
  async closeAfterPeer(ms: number): Promise<void> {
    const stop = new AbortController();
    const bound = setTimeout(() => stop.abort(), ms);
    const flushed = async (): Promise<void> => {
      while (!stop.signal.aborted) {
        if (this.cq.poll(1).length > 0) break;
        this.cq.reqNotify();
        if (this.cq.poll(1).length > 0) break;
        const slice = new AbortController();
        const t = setTimeout(() => slice.abort(), 50);
        const end = (): void => slice.abort();
        stop.signal.addEventListener('abort', end, { once: true });
        try {
          (await this.ch.getCqEvent(slice.signal)).ackEvents(1);
        } catch {
          // a slice without an event: look again
        } finally {
          clearTimeout(t);
          stop.signal.removeEventListener('abort', end);
        }
      }
      stop.abort();
    };
    // Ends with the bound, or once the receive was flushed first.
    const disconnected = async (): Promise<void> => {
      if (await peerDisconnected(this.id, stop.signal)) stop.abort();
    };
    await Promise.all([flushed(), disconnected()]);
    clearTimeout(bound);
    this.close();
  }
}
