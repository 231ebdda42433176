// The CM calls that make verbs objects, typed as the verbs layer types them: rdma_create_qp's
// attributes, the id's PD and CQs, and the enums they take.
import { createId, PortSpace, QpType, WrOpcode, type CmId, type CmQpInitAttr, type Qp, type SockAddr } from 'rdmacm';
import * as cm from 'rdmacm/cm';
import * as verbs from 'rdmacm/verbs';

export async function client(dst: SockAddr): Promise<Qp> {
  const id: CmId = createId(null, null, PortSpace.TCP);
  await id.resolveAddr(null, dst, 2000);
  await id.resolveRoute(2000);
  const attr: CmQpInitAttr = { qpType: QpType.RC, cap: { maxSendWr: 4, maxRecvWr: 4 }, sqSigAll: true };
  const qp = id.createQp(null, attr);
  const pd: verbs.Pd | undefined = id.pd ?? undefined;
  void pd;
  return qp;
}

export function sameEnums(): void {
  const a: cm.PortSpace = PortSpace.UDP;
  const b: verbs.QpType = QpType.UD;
  void a;
  void b;
}

export function wrongUse(id: CmId): void {
  // @ts-expect-error a QP type from the wrong enum
  id.createQp(null, { qpType: WrOpcode.SEND });
  // @ts-expect-error cap fields are numbers
  id.createQp(null, { cap: { maxSendWr: '4' } });
  // @ts-expect-error a port space is PortSpace, not a QP type
  createId(null, null, QpType.RC);
  // @ts-expect-error an address needs its port
  void id.resolveAddr(null, { address: '127.0.0.1' });
}
