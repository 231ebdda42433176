// The verbs objects as a TypeScript consumer meets them: made with `using` in creation order
// (disposed in reverse: the order ibverbs requires), every one Disposable, work requests and
// completions typed by their enums.
import {
  getDeviceList,
  Access,
  MwType,
  QpType,
  QpState,
  SendFlags,
  WcOpcode,
  WcStatus,
  WrOpcode,
  RdmaError,
  type Ah,
  type CompChannel,
  type Context,
  type Cq,
  type CqEx,
  type Mr,
  type Mw,
  type Pd,
  type Qp,
  type QpEx,
  type SendWr,
  type Srq,
  type Wc,
} from 'rdmacm';

export function scope(): void {
  const dev = getDeviceList()[0];
  if (dev === undefined) return;
  using ctx = dev.open();
  using ch = ctx.createCompChannel();
  using cq = ctx.createCq(16, ch);
  using pd = ctx.allocPd();
  using mr = pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  using qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 4, maxRecvWr: 4 } });
  const sge = { addr: mr.addr, length: mr.length, lkey: mr.lkey };
  qp.postRecv({ wrId: 1n, sgList: [sge] });
  qp.postSend([
    { wrId: 2, opcode: WrOpcode.SEND, sgList: [sge], sendFlags: SendFlags.SIGNALED },
    { wrId: 3, opcode: WrOpcode.RDMA_WRITE, sgList: [sge], rdma: { remoteAddr: 0, rkey: 0 } },
  ]);
  const state: QpState = qp.state;
  void state;
  for (const wc of cq.poll(4)) {
    const ok: boolean = wc.status === WcStatus.SUCCESS && wc.opcode === WcOpcode.RECV;
    void ok;
  }
}

export function allDisposable(ctx: Context, pd: Pd, mr: Mr, mw: Mw, cq: Cq, cqx: CqEx, ch: CompChannel, qp: Qp, qpx: QpEx, srq: Srq, ah: Ah): Disposable[] {
  return [ctx, pd, mr, mw, cq, cqx, ch, qp, qpx, srq, ah];
}

export function wrongUse(pd: Pd, qp: Qp, cq: Cq, mr: Mr): void {
  // @ts-expect-error a completion opcode is no work request opcode
  qp.postSend({ wrId: 1, opcode: WcOpcode.SEND, sgList: [] });
  // @ts-expect-error an opcode is an enum member, not its name
  qp.postSend({ wrId: 1, opcode: 'SEND', sgList: [] });
  // @ts-expect-error no opcode with that value
  const op: WrOpcode = 42;
  void op;
  // @ts-expect-error a send WR needs its opcode
  const noOpcode: SendWr = { wrId: 1, sgList: [] };
  void noOpcode;
  // @ts-expect-error sgList is required
  qp.postRecv({ wrId: 1 });
  // @ts-expect-error a wr_id is a number or a bigint
  qp.postRecv({ wrId: 'one', sgList: [] });
  // @ts-expect-error an SGE names its lkey
  qp.postRecv({ wrId: 1, sgList: [{ addr: mr.addr, length: 1 }] });
  // @ts-expect-error RDMA operands are remoteAddr and rkey
  qp.postSend({ wrId: 1, opcode: WrOpcode.RDMA_READ, sgList: [], rdma: { addr: 0, rkey: 0 } });
  // @ts-expect-error atomics take 64-bit operands as bigints
  qp.postSend({ wrId: 1, opcode: WrOpcode.ATOMIC_FETCH_AND_ADD, sgList: [], atomic: { remoteAddr: 0, rkey: 0, compareAdd: 1 } });
  // @ts-expect-error a QP type from the wrong enum
  pd.createQp({ qpType: WrOpcode.SEND, sendCq: cq, recvCq: cq, cap: {} });
  // @ts-expect-error the send CQ is required
  pd.createQp({ qpType: QpType.RC, recvCq: cq, cap: {} });
  // @ts-expect-error memory is a buffer or a view, not a string
  pd.regMr('bytes', Access.LOCAL_WRITE);
  // @ts-expect-error a window type is MwType
  pd.allocMw(QpType.RC);
  // @ts-expect-error keys are read-only
  mr.lkey = 0;
  // @ts-expect-error a polled completion may be missing (noUncheckedIndexedAccess)
  const first: Wc = cq.poll(1)[0];
  void first;
  // @ts-expect-error the window type enum has no such member
  void MwType.TYPE_3;
}

export function errors(e: unknown): string {
  if (e instanceof RdmaError) {
    // @ts-expect-error a code is an errno name
    if (e.code === 'ENOSUCHERRNO') return 'never';
    return `${e.code} ${e.errno} ${e.op ?? ''}`;
  }
  return String(e);
}
