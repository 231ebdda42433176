/**
 * Per-device counters of the soft RoCE device, read with `roceCounters(deviceName)` (the
 * equivalent of `rdma statistic show link rxe0/1`, which lists rxe's hw counters).
 *
 * The first group carries rxe's own names and meanings (rxe_hw_counters.c); the `rcvd_*_drop`
 * group has one counter per reason a received datagram is dropped, which rxe only reports in its
 * kernel log; the `fwd_*` group counts datagrams handed between processes sharing the UDP port
 * (see docs/design/roce.md). The port attributes `bad_pkey_cntr` and `qkey_viol_cntr` of
 * `ibv_query_port` are kept as rxe keeps them (16-bit, saturating).
 */

/** The counter names, in the order they are listed. */
export const COUNTER_NAMES = [
  // rxe's hw counters (rxe_hw_counters.c), same names
  'sent_pkts',
  'rcvd_pkts',
  'duplicate_request',
  'out_of_seq_request',
  'rcvd_rnr_err',
  'send_rnr_err',
  'rcvd_seq_err',
  'ack_deferred',
  'retry_exceeded_err',
  'retry_rnr_exceeded_err',
  'completer_retry_err',
  'send_err',
  'link_downed',
  'rdma_sends',
  'rdma_recvs',
  // RC responder: requests refused with a remote access error NAK (bad rkey, bounds, rights)
  'rkey_violation_err',
  // received datagrams dropped, by reason
  'rcvd_truncated_drop',
  'rcvd_bad_version_drop',
  'rcvd_bad_opcode_drop',
  'rcvd_bad_length_drop',
  'rcvd_bad_pad_drop',
  'rcvd_icrc_err_drop',
  'rcvd_dgid_mismatch_drop',
  'rcvd_unknown_qpn_drop',
  'rcvd_qp_state_drop',
  'rcvd_bad_pkey_drop',
  'rcvd_bad_qkey_drop',
  'rcvd_no_recv_wqe_drop',
  'rcvd_mcast_no_group_drop',
  'rcvd_mad_unroutable_drop',
  // CM replies (SIDR_REP, REP, REJ, MRA, RTU, DREQ, DREP) from an address or QP other than the
  // peer the request or connection they name was made with
  'rcvd_mad_src_drop',
  // RC: responses that fit no request, packets from an address other than the connected peer
  'rcvd_bad_resp_drop',
  'rcvd_rc_addr_drop',
  // multicast
  'sent_mcast_pkts',
  'rcvd_mcast_pkts',
  // datagrams for QPs of another process on this host (fwd-tx.ts, fwd-rx.ts): handed over,
  // received, lost on a connection that failed, forwarding connections opened, and datagrams a
  // process of another user handed over with a source address not of this host (dropped)
  'fwd_sent',
  'fwd_rcvd',
  'fwd_failed_drop',
  'fwd_connect',
  'fwd_forged_drop',
  // the connection manager: REQs dropped because their listener had `backlog` half-open
  // connections (SIDR_REQs: `backlog` unanswered); unsolicited answers and REP resends not sent
  // (cm/reply-limit.ts, cm/conn.ts)
  'rcvd_req_backlog_drop',
  'cm_reply_suppressed',
  // datagrams the kernel dropped before the device saw them: a receive buffer of this process
  // was full (read from /proc/net/udp when the counters are read; RDMACM_ROCE_SOCKBUF)
  'udp_rcvbuf_drop',
  // fault injection (impair.ts, RDMACM_ROCE_IMPAIR): datagrams of this device the impairment
  // dropped, duplicated, held back out of order, delayed in order, corrupted, dropped in a partition
  'inject_drop',
  'inject_dup',
  'inject_reorder',
  'inject_delay',
  'inject_corrupt',
  'inject_partition_drop',
] as const;

/** One counter name. */
export type CounterName = (typeof COUNTER_NAMES)[number];

const INDEX: Readonly<Record<CounterName, number>> = Object.fromEntries(COUNTER_NAMES.map((n, i) => [n, i])) as Record<
  CounterName,
  number
>;

/** Counter indexes by name, for the data path (`c.inc(C.sent_pkts)`). */
export const C = INDEX;

/** Whether the counter at an index is a receive drop (`rcvd_*_drop`), by index. */
const IS_RX_DROP = Uint8Array.from(COUNTER_NAMES, (n) => (n.startsWith('rcvd_') && n.endsWith('_drop') ? 1 : 0));

/** The counters of one device. */
export class RoceCounters {
  /** Values, indexed by {@link C}. */
  readonly v = new Float64Array(COUNTER_NAMES.length);
  /** `bad_pkey_cntr` of the port (saturates at 0xFFFF, as rxe's `set_bad_pkey_cntr`). */
  badPkeyCntr = 0;
  /** `qkey_viol_cntr` of the port (saturates at 0xFFFF, as rxe's `set_qkey_viol_cntr`). */
  qkeyViolCntr = 0;
  /** The sum of the `rcvd_*_drop` counters, kept as they count (see {@link drops}). */
  private rxDropped = 0;

  /** Add one to counter `i` (an index from {@link C}). */
  inc(i: number): void {
    this.v[i] = (this.v[i] ?? 0) + 1;
    if (IS_RX_DROP[i] === 1) this.rxDropped++;
  }

  /** Add `n` to counter `i` (an index from {@link C}). */
  add(i: number, n: number): void {
    this.v[i] = (this.v[i] ?? 0) + n;
    if (IS_RX_DROP[i] === 1) this.rxDropped += n;
  }

  /** A P_Key violation: the drop counter and the port's `bad_pkey_cntr`. */
  badPkey(): void {
    this.inc(C.rcvd_bad_pkey_drop);
    this.badPkeyCntr = Math.min(0xffff, this.badPkeyCntr + 1);
  }

  /** A Q_Key violation: the drop counter and the port's `qkey_viol_cntr`. */
  badQkey(): void {
    this.inc(C.rcvd_bad_qkey_drop);
    this.qkeyViolation();
  }

  /**
   * The port's `qkey_viol_cntr` alone: one attached QP of a multicast group refused a datagram
   * for its Q_Key (rxe counts each such QP); whether the datagram was dropped is decided once,
   * for all the group's QPs.
   */
  qkeyViolation(): void {
    this.qkeyViolCntr = Math.min(0xffff, this.qkeyViolCntr + 1);
  }

  /** Every counter by name (a copy). */
  snapshot(): Record<CounterName, number> {
    const out = {} as Record<CounterName, number>;
    for (let i = 0; i < COUNTER_NAMES.length; i++) out[COUNTER_NAMES[i] as CounterName] = this.v[i] ?? 0;
    return out;
  }

  /**
   * The sum of every `rcvd_*_drop` counter. The receive path reads it around a delivery: a
   * datagram the responder, the completer or the GSI agent dropped (and counted) is not also
   * counted in `rcvd_pkts`.
   */
  drops(): number {
    return this.rxDropped;
  }
}
