/**
 * The listeners of this process (cm.c `ib_cm_listen` as rdma_cm's `cma_listen_on_all` drives it
 * over RoCE): one per service ID `(port space << 16) | port`, published to the host as
 * `@rdmacm-roce-<port>-svc-<service id>` so requests reach this process and a second listener on
 * the same port fails in any process; and what each holds of its `rdma_listen` backlog.
 */
import { err } from '../../../errors.js';
import { random } from '../../../util/random.js';
import { serviceId, type CmHost, type CmListener, type ListenRequest, type PortSpace, type SockAddr } from '../../../cm/transport.js';
import { RoceDevice } from '../device.js';
import { PortAgent } from '../udp.js';
import { RXE_PROVIDER, rxeDeviceInfos } from '../provider.js';
import { isAnyAddr } from './addr.js';
import { sidKey } from './ids.js';

export interface Listener {
  host: CmHost;
  addr: SockAddr;
  ps: PortSpace;
  port: number;
  /** rdma_listen's backlog: the requests the listener may hold unanswered or half-open. */
  backlog: number;
}

/** Listeners by service ID (hex). */
const listeners = new Map<string, Listener>();

/** The listener of service ID `sid` in this process, if any. */
export function findListener(sid: bigint): Listener | undefined {
  return listeners.get(sidKey(sid));
}

/**
 * rdma_listen: take the service ID of the host's port space and `req.addr`'s port (a free one
 * for port 0) and start receiving on the devices the listener covers.
 */
export async function listen(host: CmHost, req: ListenRequest): Promise<CmListener> {
  const op = 'rdma_listen';
  const agent = PortAgent.get();
  const ps = host.portSpace;
  let port = req.addr.port;
  let key = '';
  for (let tries = 0; ; tries++) {
    if (port === 0) port = 32768 + random.below(28000);
    key = sidKey(serviceId(ps, port));
    if (!listeners.has(key) && agent.publishService(key)) break;
    if (req.addr.port !== 0 || tries > 64) throw err('EADDRINUSE', op, `${req.addr.address}:${port}`);
    port = 0;
  }
  const l: Listener = { host, addr: { ...req.addr }, ps, port, backlog: req.backlog };
  listeners.set(key, l);
  // Start receiving on the devices the listener covers, so requests arrive: from other hosts,
  // and those other processes of this host hand over (they go to the device of the address they
  // reached). A wildcard listener covers every soft RoCE device of the host, opened now if this
  // process has not used it yet (only the pinned one with a pin).
  if (isAnyAddr(req.addr.address)) {
    for (const info of rxeDeviceInfos()) {
      const served = info.addresses.some((a) => host.deviceFor(a.address.split('%')[0] ?? a.address)?.info.name === info.name);
      if (served) RoceDevice.of(info).activate();
    }
  }
  else {
    const d = host.deviceFor(req.addr.address);
    if (d && d.provider === RXE_PROVIDER) RoceDevice.of(d.info).activate();
  }
  return {
    port,
    close: () => {
      if (listeners.get(key) === l) listeners.delete(key);
      agent.withdrawService(key);
    },
    holdLoop: (on) => agent.holdService(key, on),
  };
}

/**
 * Requests a listener holds against its backlog, per listener host: at most `backlog`; one past
 * it is dropped without an answer (the kernel's rdma_cm refuses the CONNECT_REQUEST with -ENOMEM
 * and cm.c drops the request silently), so the requester's resend finds room later.
 */
export class Backlog {
  private readonly held = new Map<CmHost, number>();

  /** The requests `host` holds. */
  of(host: CmHost): number {
    return this.held.get(host) ?? 0;
  }

  /** One more request held by `host`. */
  take(host: CmHost): void {
    this.held.set(host, this.of(host) + 1);
  }

  /** A request of `host` is answered or ended: its place is free again. */
  leave(host: CmHost): void {
    const n = (this.held.get(host) ?? 1) - 1;
    if (n <= 0) this.held.delete(host);
    else this.held.set(host, n);
  }

  /** The requests held over every listener. */
  total(): number {
    let n = 0;
    for (const v of this.held.values()) n += v;
    return n;
  }
}

/** SIDR_REQs reported to a listener and not answered yet (accept, reject, destroy). */
export const sidrBacklog = new Backlog();
/**
 * Half-open connections: from the REQ to ESTABLISHED (RTU or first request) or the connection's
 * end (reject, destroy, REJ, the REP's resends running out).
 */
export const rcBacklog = new Backlog();
