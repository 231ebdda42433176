/**
 * How a soft device's port follows its network interface: the work the kernel splits over a
 * driver's netdev notifier (rxe_net.c `rxe_notify`, siw_main.c `siw_netdev_event`), the RoCE GID
 * manager (roce_gid_mgmt.c, with cache.c's `dispatch_gid_change_event`), uverbs' device removal
 * (`ib_uverbs_free_hw_resources`: IB_EVENT_DEVICE_FATAL) and the CM's client callbacks (cma.c
 * `cma_process_remove`, `cma_netdev_callback`).
 *
 * A process gets no netdev notifications, so one timer polls the interfaces (netdev.ts): an
 * unref'd interval that runs only while some context of a soft device is watched — while a
 * `getAsyncEvent` waits on it, while it has QPs, or while a CM id is bound to it — at the
 * shortest interval the watched devices' transports are configured with (`portPollMs`). Nothing
 * on the data path looks at it; it never keeps a process alive.
 *
 * What a device does on each change is its provider's {@link NetdevPolicy}. Per context, each
 * change is reported once, in the order the kernel reports it:
 *
 * | interface | event | port |
 * |---|---|---|
 * | goes down (rxe: or loses its carrier) | PORT_ERR (siw: its QPs to ERR first) | DOWN |
 * | comes up (rxe: with a carrier) | PORT_ACTIVE | ACTIVE |
 * | an address added or removed (RoCE) | GID_CHANGE per GID table entry changed | — |
 * | hardware address changed | siw: LID_CHANGE; RoCE: GID_CHANGE (default GID); CM: ADDR_CHANGE | — |
 * | unregistered | PORT_ERR if it was up, then DEVICE_FATAL; CM: DEVICE_REMOVAL | — |
 *
 * Changes made while nothing watches are seen as their net result when watching resumes (a
 * down-and-up in between is no change). After DEVICE_FATAL the context is dead: its QPs are in
 * ERR (their work requests flushed), calls that make objects or query the device fail with EIO
 * (the kernel's answer once a device is disassociated), destroying objects still works.
 */
import { AsyncEventType, QpState } from './types.js';
import { readNetdevs, type NetdevState } from './netdev.js';
import type { Context } from './context.js';
import type { DeviceInfo } from './device.js';
import type { Qp } from './qp.js';

/** `enum ib_port_phys_state` values a soft device reports. */
export const PhysState = Object.freeze({ POLLING: 2, DISABLED: 3, LINK_UP: 5 });

const ZERO_MAC = '00:00:00:00:00:00';

/** The default poll interval (ms), `RDMACM_PORT_POLL_MS`. */
export const DEFAULT_PORT_POLL_MS = 1000;

/** How a soft device's port follows its interface (the driver's netdev notifier). */
export interface NetdevPolicy {
  /** Whether the port is ACTIVE in this interface state (rxe: running with a carrier; siw: up). */
  portActive(nd: NetdevState): boolean;
  /** `phys_state` for the port (rxe_query_port, siw_query_port). */
  physState(nd: NetdevState | undefined, active: boolean): number;
  /** siw_netdev_down: the device moves every QP to ERR when its interface goes down. */
  readonly errorQpsOnDown: boolean;
  /** The event a changed hardware address raises (siw: LID_CHANGE); absent: none. */
  readonly linkAddrEvent?: AsyncEventType;
  /** The port's GID table follows the interface's addresses (RoCE): GID_CHANGE per entry. */
  readonly gidEvents: boolean;
  /** The poll interval for this device (ms; the transport's `portPollMs`). */
  pollMs(info: DeviceInfo): number;
  /** The interface's addresses, MAC or MTU changed: rebuild what depends on them. */
  updated?(info: DeviceInfo): void;
  /** The port went down or came up. */
  portChanged?(info: DeviceInfo, active: boolean): void;
  /** The interface was unregistered: the device is gone. */
  removed?(info: DeviceInfo): void;
}

/** What a device-wide client (the CM) is told (the kernel's `ib_client` callbacks). */
export interface DeviceClient {
  /** The device is gone (after DEVICE_FATAL on its context). */
  removed(ctx: Context): void;
  /** Its interface's hardware address changed. */
  linkAddrChanged(ctx: Context): void;
}

const clients = new Set<DeviceClient>();

/** Register a device client (`ib_register_client`). */
export function registerDeviceClient(c: DeviceClient): void {
  clients.add(c);
}

let generation = 0;

/**
 * Bumped whenever a watched interface changes: providers that cache their device list re-read
 * it when this moved, so a listing never brings back addresses the watch has seen go.
 */
export function netdevGeneration(): number {
  return generation;
}

// -- the poller -----------------------------------------------------------------------------------

const watches = new Set<PortWatch>();
let timer: NodeJS.Timeout | null = null;
let timerMs = 0;

/** @internal The interfaces watched now and the poll interval (0: no timer): for tests. */
export function portWatchState(): { ifnames: string[]; intervalMs: number } {
  return { ifnames: [...watches].map((w) => w.ifname), intervalMs: timer === null ? 0 : timerMs };
}

function reschedule(): void {
  let ms = Infinity;
  for (const w of watches) ms = Math.min(ms, w.pollMs());
  if (ms === timerMs && timer !== null) return;
  if (timer !== null) clearInterval(timer);
  timer = null;
  timerMs = 0;
  if (ms === Infinity) return;
  timerMs = Math.max(1, ms);
  timer = setInterval(pollAll, timerMs);
  timer.unref();
}

function pollAll(): void {
  const names = new Set<string>();
  for (const w of watches) names.add(w.ifname);
  const now = readNetdevs(names);
  // Interfaces that cannot be listed here: nothing to tell.
  if (now === null) return;
  for (const w of [...watches]) w.tick(now.get(w.ifname));
}

const recent = new Map<string, { at: number; nd: NetdevState | undefined | null }>();
const RECENT_MS = 20;

/**
 * The interface state of `ifname` now (for ibv_query_port), read at most every few ms:
 * `undefined` when it does not exist, null when interfaces cannot be listed here.
 */
export function currentNetdev(ifname: string): NetdevState | undefined | null {
  const t = Date.now();
  const r = recent.get(ifname);
  if (r !== undefined && t - r.at < RECENT_MS) return r.nd;
  const all = readNetdevs(new Set([ifname]));
  const nd = all === null ? null : all.get(ifname);
  recent.set(ifname, { at: t, nd });
  return nd;
}

/**
 * The port of a soft device's context as `ibv_query_port` reports it: ACTIVE or not and its
 * `phys_state`. An interface that cannot be found counts as down; where interfaces cannot be
 * listed at all, the port is ACTIVE.
 */
export function portStatus(info: DeviceInfo, policy: NetdevPolicy): { active: boolean; physState: number } {
  const nd = currentNetdev(info.ifname);
  if (nd === null) return { active: true, physState: PhysState.LINK_UP };
  const active = nd !== undefined && policy.portActive(nd);
  return { active, physState: policy.physState(nd, active) };
}

// -- one context's watch --------------------------------------------------------------------------

interface Seen {
  active: boolean;
  mac: string;
  /** The last addresses of the interface (IPv4 ones kept while it is down). */
  addresses: DeviceInfo['addresses'];
  mtu: number;
}

/**
 * The watch over one soft device's context: holds (QPs, async readers, CM ids) start and stop
 * it; each poll compares the interface with what was last seen and reports the differences.
 */
export class PortWatch {
  private holds = 0;
  private seen: Seen | null = null;
  private dead = false;

  constructor(
    private readonly ctx: Context,
    private readonly policy: NetdevPolicy,
  ) {}

  /** The interface watched. */
  get ifname(): string {
    return this.ctx.device.info.ifname;
  }

  /** This device's poll interval. */
  pollMs(): number {
    return this.policy.pollMs(this.ctx.device.info);
  }

  /** Start watching while the returned release has not been called (idempotent release). */
  hold(): () => void {
    if (this.dead) return () => undefined;
    if (this.holds++ === 0) {
      const nd = currentNetdev(this.ifname);
      if (nd !== null) this.seen ??= this.snapshot(nd);
      watches.add(this);
      reschedule();
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.holds === 0) {
        watches.delete(this);
        reschedule();
      }
    };
  }

  private snapshot(nd: NetdevState | undefined): Seen {
    const info = this.ctx.device.info;
    if (nd === undefined) return { active: false, mac: info.mac ?? '', addresses: info.addresses, mtu: info.mtu };
    return { active: this.policy.portActive(nd), mac: nd.mac, addresses: this.addressesOf(nd, info.addresses), mtu: nd.mtu || info.mtu };
  }

  /** The addresses now: the interface's, with the IPv4 ones last seen while they cannot be read. */
  private addressesOf(nd: NetdevState, last: DeviceInfo['addresses']): DeviceInfo['addresses'] {
    if (nd.ipv4Known) return nd.addresses;
    return [...last.filter((a) => a.family === 'IPv4'), ...nd.addresses];
  }

  /** One poll: `nd` is the interface now, `undefined` once it is unregistered. */
  tick(nd: NetdevState | undefined): void {
    if (this.dead) return;
    const was = this.seen ?? this.snapshot(nd);
    const ctx = this.ctx;
    const info = ctx.device.info;
    if (nd === undefined) {
      if (was.active) this.portDown(info);
      this.remove(info);
      return;
    }
    const now = this.snapshot(nd);
    now.addresses = this.addressesOf(nd, was.addresses);
    // An interface that is not running has no MAC in the address listing: keep the last one.
    if (now.mac === ZERO_MAC) now.mac = was.mac;
    this.seen = now;
    const macChanged = now.mac !== was.mac && was.mac !== ZERO_MAC;
    const addrsChanged = !sameAddresses(now.addresses, was.addresses);
    // A port that changes state changes which addresses the device listing offers.
    if (now.active !== was.active) generation++;
    if (now.active !== was.active && !now.active) this.portDown(info);
    if (macChanged || addrsChanged || now.mtu !== was.mtu) {
      generation++;
      const before = this.policy.gidEvents ? gidKeys(ctx) : null;
      const next: DeviceInfo = { ...info, addresses: now.addresses, mtu: now.mtu };
      if (macChanged) next.mac = now.mac;
      ctx.device._update(next);
      this.policy.updated?.(next);
      if (before !== null) {
        const after = gidKeys(ctx);
        const n = changedEntries(before, after);
        for (let k = 0; k < n; k++) ctx._raiseAsyncEvent({ type: AsyncEventType.GID_CHANGE, portNum: 1 });
      }
      if (macChanged) {
        if (this.policy.linkAddrEvent !== undefined) ctx._raiseAsyncEvent({ type: this.policy.linkAddrEvent, portNum: 1 });
        for (const c of clients) c.linkAddrChanged(ctx);
      }
    }
    if (now.active !== was.active && now.active) {
      this.policy.portChanged?.(ctx.device.info, true);
      ctx._raiseAsyncEvent({ type: AsyncEventType.PORT_ACTIVE, portNum: 1 });
    }
  }

  /** NETDEV_DOWN: siw's QPs to ERR (siw_netdev_down), then PORT_ERR. */
  private portDown(info: DeviceInfo): void {
    this.policy.portChanged?.(info, false);
    if (this.policy.errorQpsOnDown) errorAllQps(this.ctx, 'interface down');
    this.ctx._raiseAsyncEvent({ type: AsyncEventType.PORT_ERR, portNum: 1 });
  }

  /** NETDEV_UNREGISTER: DEVICE_FATAL, the context dies, the CM is told, the device forgotten. */
  private remove(info: DeviceInfo): void {
    this.dead = true;
    watches.delete(this);
    reschedule();
    generation++;
    this.ctx._raiseAsyncEvent({ type: AsyncEventType.DEVICE_FATAL });
    this.ctx._disassociate();
    errorAllQps(this.ctx, 'device removed');
    for (const c of clients) c.removed(this.ctx);
    this.policy.removed?.(info);
    this.ctx.device._removed();
  }
}

/** Every QP of the context to ERR (the soft devices' QPs are all `Qp`s; others are skipped). */
function errorAllQps(ctx: Context, why: string): void {
  for (const qp of [...ctx._qps.values()]) {
    const q = qp as Partial<Qp>;
    if (typeof q._deviceError !== 'function' || q.state === QpState.RESET) continue;
    try {
      // The device's own move (siw_qp_modify to ERROR): the transport tears its connection down.
      q._deviceError(why);
    } catch {
      // A QP that cannot move any more is left as it is.
    }
  }
}

function sameAddresses(a: DeviceInfo['addresses'], b: DeviceInfo['addresses']): boolean {
  if (a.length !== b.length) return false;
  const key = (x: DeviceInfo['addresses'][number]): string => `${x.family}/${x.address}/${x.netmask}`;
  const s = new Set(a.map(key));
  return b.every((x) => s.has(key(x)));
}

/** The GID table of port 1 as index → hex GID. */
function gidKeys(ctx: Context): Map<number, string> {
  const out = new Map<number, string>();
  for (const e of ctx.queryGidTable()) out.set(e.gidIndex, Buffer.from(e.gid).toString('hex'));
  return out;
}

/** Entries added, removed or replaced between two tables (cache.c: one event per entry). */
function changedEntries(a: Map<number, string>, b: Map<number, string>): number {
  let n = 0;
  for (const [i, g] of a) if (b.get(i) !== g) n++;
  for (const i of b.keys()) if (!a.has(i)) n++;
  return n;
}
