/**
 * The events published on the trace channels: each one's fields and the text a trace line shows
 * for it (derived from the fields, never stored beside them). docs/tracing.md lists them per
 * channel; a new event gets a row here and there.
 */

/** Fields of each event, by event name. */
export interface TraceEventFields {
  /** Any state machine (a `StateCell`): `from -> to (why)`, states as the owner writes them. */
  state: { from: string; to: string; why: string };
  /** cm: an event posted to a CM id's channel: `event RDMA_CM_EVENT_ESTABLISHED status 0`. */
  event: { event: string; status: number };
  /** cm (RoCE CM): a CM MAD sent: `REQ -> 10.0.0.2`. */
  mad: { kind: string; to: string };
  /** mpa: an MPA Request received on a passive endpoint. */
  'mpa-request': { state: string; rev: number; crc: boolean; ird: number | undefined; ord: number | undefined; p2p: boolean | undefined; privateDataLength: number };
  /** mpa: an MPA Reply received on an active endpoint. */
  'mpa-reply': { state: string; rev: number; crc: boolean; reject: boolean; enhanced: boolean; ird: number | undefined; ord: number | undefined; p2p: boolean | undefined };
  /** mpa: an MPA Reply (accept) sent by a passive endpoint. */
  'mpa-reply-sent': { state: string; ird: number; ord: number; rtr: 'write' | 'read' | null };
  /**
   * tx (iWARP): one message sent. `msn` for untagged messages (SEND, READ_REQ), `stag` (hex) for
   * tagged ones; `zeroCopy` with the number of FPDUs when the payload went without a copy.
   */
  send: { opcode: string; bytes: number; msn?: number; stag?: string; zeroCopy?: boolean; fpdus?: number; source?: string };
  /** rx (iWARP): one message received and placed. */
  recv: { opcode: string; bytes: number; msn?: number };
  /** tx (RoCE RC/UC): one packet of a message sent, `index` of `count` (1-based). */
  packet: { transport: 'RC' | 'UC'; opcode: string; psn: number; index: number; count: number };
  /** rx (RoCE RC/UC): a request packet at the expected PSN, about to be executed. */
  request: { transport: 'RC' | 'UC'; opcode: string; psn: number; bytes: number };
  /** tx (RoCE UD): one datagram sent. */
  datagram: { opcode: string; bytes: number; to: string; remoteQpn: number };
  /** qp (iWARP): a TERMINATE sent (a local protocol error) or received from the peer; layer/etype/ecode as on the wire. */
  terminate: { direction: 'sent' | 'received'; layer: number; etype: number; ecode: number; reason: string };
  /** qp (iWARP): a work request failed locally (the QP goes to ERR). */
  'wr-error': { why: string };
  /** qp (RoCE RC/UC): the QP went to RTR with this path. */
  rtr: { sgid: string; dst: string; destQpn: number; mtu: number; rqPsn: number };
  /** qp (RoCE RC): the retransmit timer expired (rxe's local ACK timeout). */
  'ack-timeout': { psn: number };
  /** qp (RoCE RC): the requester goes back to `psn` after a timeout or a sequence-error NAK. */
  retry: { psn: number; cause: 'timeout' | 'NAK'; left: number };
  /** qp (RoCE RC): an RNR NAK; the requester waits `delayMs` (the NAK's timer value). */
  'rnr-nak': { psn: number; delayMs: number };
  /** qp (RoCE): the responder met a class C error (rxe_resp.c) at `psn`; the QP goes to ERR. */
  'responder-error': { psn: number; why: string };
  /** llp: the TCP stream of an iWARP connection: FIN sent, FIN received, socket error. */
  llp: { what: 'fin' | 'peer-fin' | 'error' | 'reset'; error?: string };
  /** roce: a packet dropped before it reached a QP (`reason` as the device's counters name it; `qpn` for an unknown QPN). */
  drop: { reason: string; from: string; qpn?: number };
  /** roce: this process claimed a block of QP numbers on the device's UDP port. */
  'qpn-block': { block: number; firstQpn: number };
  /** rs: an rsocket message received (`DATA 4096`, `CTRL SHUTDOWN`, `SGL 0x2`). */
  'rs-recv': { message: string };
  /** rs: an rsocket control, SGL or iomap message sent. */
  'rs-send': { message: string };
  /** Any subsystem: a line of free text. */
  note: { text: string };
}

/** An event name. */
export type TraceEvent = keyof TraceEventFields;

type Formatter<E extends TraceEvent> = (f: TraceEventFields[E]) => string;

/** The text of each event, from its fields. */
export const TRACE_TEXT: { readonly [E in TraceEvent]: Formatter<E> } = {
  state: (f) => `${f.from} -> ${f.to} (${f.why})`,
  event: (f) => `event ${f.event} status ${f.status}`,
  mad: (f) => `${f.kind} -> ${f.to}`,
  'mpa-request': (f) => `${f.state}: MPA Request rev ${f.rev} crc=${f.crc} ird=${String(f.ird)} ord=${String(f.ord)} p2p=${String(f.p2p)} pd ${f.privateDataLength} bytes`,
  'mpa-reply': (f) => `${f.state}: MPA Reply rev ${f.rev} flags crc=${f.crc} reject=${f.reject} enhanced=${f.enhanced} ird=${String(f.ird)} ord=${String(f.ord)} p2p=${String(f.p2p)}`,
  'mpa-reply-sent': (f) => `${f.state}: MPA Reply sent ird=${f.ird} ord=${f.ord} rtr=${String(f.rtr)}`,
  send: (f) => {
    if (f.opcode === 'READ_REQ') return `READ_REQ msn ${f.msn ?? 0} size ${f.bytes} src ${f.source ?? ''}`;
    if (f.opcode === 'READ_RESP') return `READ_RESP ${f.bytes} bytes to ${f.stag ?? ''}`;
    const where = f.msn !== undefined ? ` msn ${f.msn}` : ` stag ${f.stag ?? ''}`;
    return `${f.opcode} ${f.bytes} bytes${where}${f.zeroCopy === true ? ` (zero-copy, ${f.fpdus ?? 0} FPDUs)` : ''}`;
  },
  recv: (f) => (f.msn !== undefined ? `${f.opcode} ${f.bytes} bytes msn ${f.msn}` : `${f.opcode} complete ${f.bytes} bytes`),
  packet: (f) => `${f.transport} ${f.opcode} psn ${f.psn} (${f.index}/${f.count})`,
  request: (f) => `${f.transport} ${f.opcode} psn ${f.psn} ${f.bytes} bytes`,
  datagram: (f) => `UD ${f.opcode} ${f.bytes}B -> ${f.to} QPN 0x${f.remoteQpn.toString(16)}`,
  terminate: (f) => (f.direction === 'sent' ? `sending TERMINATE: ${f.reason}` : f.reason),
  'wr-error': (f) => `WR failed: ${f.why}`,
  rtr: (f) => `RTR: ${f.sgid} -> ${f.dst} QPN 0x${f.destQpn.toString(16)} MTU ${f.mtu} rq_psn ${f.rqPsn}`,
  'ack-timeout': (f) => `local ACK timeout at psn ${f.psn}`,
  retry: (f) => `retry from psn ${f.psn} (${f.cause === 'timeout' ? 'timeout' : 'NAK'}), ${f.left} left`,
  'rnr-nak': (f) => `RNR NAK at psn ${f.psn}: retry in ${f.delayMs} ms`,
  'responder-error': (f) => `responder error at psn ${f.psn}: ${f.why}`,
  llp: (f) => (f.what === 'fin' ? 'FIN' : f.what === 'peer-fin' ? 'peer FIN' : f.what === 'reset' ? `RST ${f.error ?? ''}` : `error ${f.error ?? ''}`),
  drop: (f) => (f.qpn !== undefined ? `drop unknown QPN 0x${f.qpn.toString(16)} from ${f.from}` : `drop ${f.reason} from ${f.from}`),
  'qpn-block': (f) => `claimed QPN block ${f.block} (0x${f.firstQpn.toString(16)}..)`,
  'rs-recv': (f) => `recv ${f.message}`,
  'rs-send': (f) => `send ${f.message}`,
  note: (f) => f.text,
};
