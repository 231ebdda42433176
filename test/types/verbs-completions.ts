// Waiting for and reading completions: async iteration of a CQ and of a completion channel,
// the extended CQ's readers and the QP builder, async events; each typed by the verbs' enums.
import {
  AsyncEventType,
  WcExFlags,
  WcOpcode,
  WcStatus,
  WC_STANDARD_FLAGS,
  eventTypeStr,
  qpToQpEx,
  type AsyncEvent,
  type CompChannel,
  type Context,
  type Cq,
  type Qp,
  type Wc,
} from 'rdmacm/verbs';
import { Errno } from 'rdmacm';

export async function drain(cq: Cq, ch: CompChannel, signal: AbortSignal): Promise<number> {
  let n = 0;
  for await (const wc of cq.completions({ signal, max: 4 })) {
    const w: Wc = wc;
    if (w.status !== WcStatus.SUCCESS) break;
    n++;
  }
  const ready: number = await cq.waitForCompletions(signal);
  const fired: Cq = await ch.getCqEvent(signal);
  fired.ackEvents(1);
  for await (const c of ch) {
    c.ackEvents(1);
    break;
  }
  return n + ready;
}

export function extended(ctx: Context, qp: Qp): void {
  using cqx = ctx.createCqEx({ cqe: 16, wcFlags: WC_STANDARD_FLAGS | WcExFlags.WITH_IMM });
  if (cqx.startPoll() !== Errno.ENOENT) {
    do {
      const op: WcOpcode = cqx.readOpcode();
      const len: number = cqx.readByteLen();
      void op;
      void len;
    } while (cqx.nextPoll() === 0);
    cqx.endPoll();
  }
  const x = qpToQpEx(qp);
  if (x === null) return;
  x.wrStart();
  x.wrId = 5n;
  x.wrRdmaWrite(0x1234, 0x1000);
  x.wrSetSge(1, 0x2000, 8);
  const rc: number = x.wrComplete();
  void rc;
  // @ts-expect-error qpToQpEx can answer null (a QP without send_ops_flags)
  qpToQpEx(qp).wrStart();
  // @ts-expect-error an rkey is a number
  x.wrRdmaWrite('0x1234', 0x1000);
  // @ts-expect-error the extended CQ needs its size
  ctx.createCqEx({ wcFlags: WC_STANDARD_FLAGS });
}

export async function events(ctx: Context, signal: AbortSignal): Promise<string> {
  const ev: AsyncEvent = await ctx.getAsyncEvent(signal);
  ctx.ackAsyncEvent(ev);
  // @ts-expect-error events are read-only
  ev.type = AsyncEventType.QP_FATAL;
  // @ts-expect-error a WcStatus is no async event type
  eventTypeStr(WcStatus.SUCCESS);
  return eventTypeStr(ev.type);
}
