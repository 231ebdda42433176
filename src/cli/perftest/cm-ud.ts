/**
 * UD QPs with `-R` (perftest_communication.c `rdma_cm_request_ud_connection_parameters`,
 * `rdma_cm_initialize_ud_connection_parameters`, `rdma_cm_send_ud_connection_parameters`,
 * `rdma_cm_establish_ud_connection`): the ids are RDMA_PS_UDP ones, connected by SIDR. The client
 * learns the server's QP number, Q_Key and address from its ESTABLISHED event. When the server
 * sends too (the latency tests), the client then SENDs it 4 bytes with its own QP number as
 * immediate data, and the server, which posted a receive for it before accepting, makes its
 * address handle from that completion and its GRH; the Q_Key is its own QP's (both are
 * RDMA_UDP_QKEY).
 */
import { QpAttrMask, SendFlags, WcOpcode, WcStatus, WrOpcode, createAhFromWc, type CmId, type Cq, type Qp, type Wc } from '../api.js';
import { Test, type PerfParams } from './params.js';
import { UD_ADDITION, type Resources } from './resources.js';

/** The 32-bit word the client sends (perftest sends its buffer's first 4 bytes). */
const PARAMS_LEN = 4;
/** How long a side waits for the other's message or its own send (perftest spins for ever). */
const PARAMS_TIMEOUT_MS = 60_000;

/** Whether the server sends (a latency test; perftest's duplex runs too, which this port lacks). */
const serverSends = (p: PerfParams): boolean => p.tst === Test.LAT;

/** One completion of `cq`, polled with turns of the event loop, or an error after the timeout. */
async function pollOne(cq: Cq, what: string): Promise<Wc> {
  const end = Date.now() + PARAMS_TIMEOUT_MS;
  for (;;) {
    const w = cq.poll(1);
    if (w.length > 0) return w[0] as Wc;
    if (Date.now() > end) throw new Error(`${what}: no completion in ${PARAMS_TIMEOUT_MS / 1000} s`);
    await new Promise((res) => setImmediate(res));
  }
}

/** QP `i`'s first bytes: where the client's word is sent from and received into (GRH first). */
const area = (r: Resources, i: number): number => r.mr.addr + i * r.half;

/** `rdma_cm_request_ud_connection_parameters`: before accepting, a receive for the client's word. */
export function udServerPrepare(p: PerfParams, r: Resources): void {
  if (!serverSends(p)) return;
  r.qps.forEach((qp, i) => qp.postRecv({ wrId: 0, sgList: [{ addr: area(r, i), length: UD_ADDITION + PARAMS_LEN, lkey: r.mr.lkey }] }));
}

/** `rdma_cm_initialize_ud_connection_parameters`: after accepting, the peer from the client's word. */
export async function udServerAccepted(p: PerfParams, r: Resources, ids: CmId[]): Promise<void> {
  if (!serverSends(p)) return;
  for (let i = 0; i < r.qps.length; i++) {
    const wc = await pollOne(r.recvCq, 'rdma_cm UD connection parameters');
    if (wc.status !== WcStatus.SUCCESS || wc.opcode !== WcOpcode.RECV || Number(wc.wrId) !== 0) {
      throw new Error(`Failed to poll CQ.\nBad WQE status when trying to create AH for UD connection in RDMA CM:\n Status: ${wc.status} ; ID: ${Number(wc.wrId)}.`);
    }
    const qp = r.qps[i] as Qp;
    r.ahs[i] = createAhFromWc(r.pd, wc, r.buf.subarray(i * r.half, i * r.half + UD_ADDITION), (ids[i] as CmId).portNum);
    r.udPeers[i] = { qpn: wc.immData, qkey: qp.query(QpAttrMask.QKEY).qkey ?? 0 };
  }
}

/**
 * `rdma_cm_establish_ud_connection` on the client: the server's QP number, Q_Key and address
 * handle from each id's ESTABLISHED event; when the server sends, the word that tells it ours.
 */
export async function udClientEstablished(p: PerfParams, r: Resources, ids: CmId[]): Promise<void> {
  for (let i = 0; i < ids.length; i++) {
    const ud = (ids[i] as CmId).event?.param.ud;
    if (!ud) throw new Error('Failed to establish UD connection for RDMA CM.');
    const ah = r.pd.createAh(ud.ahAttr);
    r.ahs[i] = ah;
    r.udPeers[i] = { qpn: ud.qpNum, qkey: ud.qkey };
    if (!serverSends(p)) continue;
    const qp = r.qps[i] as Qp;
    qp.postSend({
      wrId: 0,
      opcode: WrOpcode.SEND_WITH_IMM,
      sgList: [{ addr: area(r, i), length: PARAMS_LEN, lkey: r.mr.lkey }],
      sendFlags: SendFlags.SIGNALED,
      immData: qp.qpNum,
      ud: { ah, remoteQpn: ud.qpNum, remoteQkey: ud.qkey },
    });
    const wc = await pollOne(r.sendCq, 'rdma_cm UD connection parameters');
    if (wc.status !== WcStatus.SUCCESS || wc.opcode !== WcOpcode.SEND || Number(wc.wrId) !== 0) {
      throw new Error(`Failed to poll CQ.\nBad WQE status when trying to send UD connection parameters in RDMA CM:\n Status: ${wc.status} ; ID: ${Number(wc.wrId)}.`);
    }
  }
}
