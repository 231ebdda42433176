// The rdma_cm surface as a TypeScript consumer meets it: events narrowed by `switch (ev.event)`,
// event channels and ids disposed by `using` / `await using`, the trailing AbortSignal of the
// calls that wait. Compiled, never run (test/unit/types.test.js).
import { CmEventType, PortSpace, createEventChannel, createId, type CmEvent, type CmId, type EventConnParam } from 'rdmacm';

export function describeEvent(ev: CmEvent): string {
  switch (ev.event) {
    case CmEventType.CONNECT_REQUEST: {
      // Narrowed: a connect request always names its listening id.
      const listener: CmId = ev.listenId;
      const conn: EventConnParam = ev.param.conn;
      return `${listener.srcPort} ${conn.privateData.length}`;
    }
    case CmEventType.MULTICAST_JOIN:
    case CmEventType.MULTICAST_ERROR:
      return String(ev.mcContext);
    case CmEventType.ESTABLISHED: {
      // @ts-expect-error only a connect request has a listening id
      const l: CmId = ev.listenId;
      return String(l);
    }
    case CmEventType.REJECTED:
    case CmEventType.ADDR_ERROR:
      return `status ${ev.status}`;
    default:
      return String(ev.event);
  }
}

export async function scoped(signal: AbortSignal): Promise<void> {
  using ch = createEventChannel();
  await using id = createId(ch, null, PortSpace.TCP);
  await id.resolveAddr(null, { address: '127.0.0.1', port: 7471 }, 2000, signal);
  const ev = await ch.getEvent(signal);
  ev.ack();
  await id.resolveRoute(2000, signal);
  await id.connect({ privateData: new Uint8Array(4) }, signal);
  await id.disconnect(signal);
}

export async function server(signal: AbortSignal): Promise<CmId> {
  await using listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '0.0.0.0', port: 0 });
  await listen.listen(8, signal);
  const child = await listen.getRequest(signal);
  await child.accept(undefined, signal);
  return child;
}

export async function wrongUse(id: CmId): Promise<void> {
  // @ts-expect-error a signal is an AbortSignal
  await id.connect(undefined, 5);
  // @ts-expect-error the port is a number
  await id.resolveAddr(null, { address: '127.0.0.1', port: '7471' });
}
