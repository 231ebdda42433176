/**
 * The events published on the trace channels: each one's fields and the text a trace line shows
 * for it (derived from the fields, never stored beside them). docs/tracing.md lists them per
 * channel; a new event gets a row here and there.
 */

/** Fields of each event, by event name. */
export interface TraceEventFields {
  /** Any state machine ({@link StateCell}): `from -> to (why)`, states as the owner writes them. */
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
  'mpa-reply-sent': { state: string; ird: number; ord: number; rtr: string | null };
  /**
   * tx (iWARP): one message sent. `msn` for untagged messages (SEND, READ_REQ), `stag` (hex) for
   * tagged ones; `zeroCopy` with the number of FPDUs when the payload went without a copy.
   */
  send: { opcode: string; bytes: number; msn?: number; stag?: string; zeroCopy?: boolean; fpdus?: number; source?: string };
  /** rx (iWARP): one message received and placed. */
  recv: { opcode: string; bytes: number; msn?: number };
  /** tx (RoCE RC/UC): one packet of a message sent, `index` of `count` (1-based). */
  packet: { transport: 'RC' | 'UC'; opcode: string; psn: number; index: number; count: number };
  /** tx (RoCE UD): one datagram sent. */
  datagram: { opcode: string; bytes: number; to: string; remoteQpn: number };
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
  datagram: (f) => `UD ${f.opcode} ${f.bytes}B -> ${f.to} QPN 0x${f.remoteQpn.toString(16)}`,
  'rs-recv': (f) => `recv ${f.message}`,
  'rs-send': (f) => `send ${f.message}`,
  note: (f) => f.text,
};
