/**
 * Device context (`struct ibv_context`): `ibv_query_device`, `ibv_query_port`, `ibv_alloc_pd`,
 * `ibv_create_comp_channel`, `ibv_create_cq`, `ibv_get_async_event` / `ibv_ack_async_event`,
 * plus the device-wide tables the transport uses: the MR (STag) table and the QP table.
 *
 * One context per device per process (`Device.open()` returns a singleton), so the MR and QP
 * tables are device-wide as in siw (`siw_device.mem_xa`, `qp_xa`).
 *
 * QP numbers start at 1, as siw's (`xa_alloc` on an XA_FLAGS_ALLOC1 array), but count upwards
 * instead of taking the lowest free number, so a destroyed QP's number is not reused at once (a
 * completion of the old QP still in a CQ cannot be mistaken for the new one). A QP is live while
 * it is in `ctx._qps`; its number is free again once it leaves that map.
 */
import { availableParallelism } from 'node:os';
import { err } from '../errors.js';
import { AsyncEventQueue } from './async-event.js';
import type { AsyncEvent } from './async-event.js';
import { CompChannel } from './comp-channel.js';
import { Cq } from './cq.js';
import type { Device } from './device.js';
import { LinkLayer, type DeviceAttr, type PortAttr } from './device-attr.js';
import { MrTable } from './mr.js';
import { Pd } from './pd.js';
import type { QpLike } from './provider.js';
import { GidType, TransportType } from './types.js';
import { ifindexOf } from './ifindex.js';
import { createCqEx, createQpEx, queryDeviceEx, type QpInitAttrEx } from './ex-verbs.js';
import type { CqEx, CqInitAttrEx } from './cq-ex.js';
import type { DeviceAttrEx } from './device-attr-ex.js';
import type { Qp } from './qp.js';
import { PortWatch } from './port-watch.js';

/** The default (full-membership) P_Key, IB spec 10.9.1.1. */
export const DEFAULT_PKEY = 0xffff;

/** `struct ibv_gid_entry`: one valid entry of a port's GID table (`ibv_query_gid_table`). */
export interface GidEntry {
  /** The GID (16 bytes, a copy). */
  gid: Uint8Array;
  /** `gid_index`. */
  gidIndex: number;
  /** `port_num`. */
  portNum: number;
  /** `gid_type`: IB, RoCE v1 or RoCE v2. */
  gidType: GidType;
  /** `ndev_ifindex`: the interface index of the entry's net device (0 if unknown). */
  ndevIfindex: number;
}

/** Largest QP number (24 bits, as IB QPNs) before numbering wraps to 1. */
const MAX_QP_NUM = 0xff_ffff;

/** `struct ibv_context`. Obtain with `Device.open()`. */
export class Context {
  /** The device. */
  readonly device: Device;
  /** `num_comp_vectors` (siw: the number of CPUs). */
  readonly numCompVectors: number;
  /** @internal The device attributes (frozen; `queryDevice()` returns copies). */
  readonly _attr: Readonly<DeviceAttr>;
  /** @internal The MR access rights the device enforces (the provider's `accessMask`). */
  readonly _accessMask: number;
  /** @internal The device-wide MR table: `ctx._mrs.lookup(stag)`. */
  readonly _mrs = new MrTable();
  /** @internal Live QPs by QP number (maintained by `Pd.createQp` / `Pd._releaseQp`). */
  readonly _qps = new Map<number, QpLike>();
  /** @internal The async event queue. */
  readonly _async = new AsyncEventQueue();
  /** @internal Live address handles (all PDs), against `maxAh`. */
  _ahCount = 0;
  /** @internal Live SRQs (all PDs), against `maxSrq`. */
  _srqCount = 0;
  private _srqHandle = 1;
  /** @internal Live PDs, against `maxPd`. */
  _pdCount = 0;
  /** @internal Live CQs, against `maxCq`. */
  _cqCount = 0;
  private _nextPdHandle = 1;
  private _nextCqHandle = 1;
  /** @internal Live completion channels. */
  readonly _channels = new Set<CompChannel>();
  /** @internal Live PDs and CQs of this context (for the resource listing, src/stat/). */
  readonly _pdSet = new Set<Pd>();
  readonly _cqSet = new Set<Cq>();
  private _qpNumNext = 1;
  /** QP numbers handed out by `_allocQpNum` whose QP is not registered in `_qps` yet. */
  private readonly _qpNumPending = new Set<number>();
  /** @internal The watch over a soft device's interface (port-watch.ts); null for other devices. */
  readonly _portWatch: PortWatch | null;
  /** The watch hold the context's QPs take while it has any. */
  private _qpHold: (() => void) | null = null;
  /** The device is gone (DEVICE_FATAL was raised): see {@link _checkAlive}. */
  private _dead = false;
  /** `Device.open()` calls not yet matched by a `close()`: none, the context is closed. */
  private _opens = 0;

  /** @internal Use `Device.open()`. */
  constructor(device: Device) {
    this.device = device;
    this._attr = Object.freeze(device._deviceAttr());
    const provider = device._provider('ibv_open_device');
    this._accessMask = provider.accessMask(device.info);
    this._portWatch = provider.netdevPolicy ? new PortWatch(this, provider.netdevPolicy) : null;
    let cpus = 1;
    try {
      cpus = availableParallelism();
    } catch {
      cpus = 1;
    }
    this.numCompVectors = Math.max(1, cpus);
  }

  /**
   * `ibv_query_device()`: the device attributes (a fresh copy).
   * @throws RdmaError EBADF once the context is closed.
   */
  queryDevice(): DeviceAttr {
    this._checkOpen('ibv_query_device');
    return { ...this._attr };
  }

  /**
   * `ibv_query_port()`: the provider's port attributes (siw: one port, always ACTIVE, Ethernet
   * link layer, IB MTU enum from the interface MTU).
   * @throws RdmaError EINVAL for a port number outside 1..`physPortCnt`.
   */
  queryPort(portNum = 1): PortAttr {
    this._checkAlive('ibv_query_port');
    this._checkPort(portNum, 'ibv_query_port');
    return this.device._portAttr(portNum);
  }

  /**
   * `ibv_query_gid()`: entry `index` of the port's GID table (16 bytes, a fresh copy). siw: one
   * entry, the interface MAC zero padded; RoCE: the interface's IP addresses as GIDs.
   * @throws RdmaError EINVAL for a bad port or an index outside 0..`gidTblLen`-1.
   */
  queryGid(portNum: number, index: number): Uint8Array {
    const op = 'ibv_query_gid';
    const port = this.queryPort(portNum);
    if (!Number.isInteger(index) || index < 0 || index >= port.gidTblLen) throw err('EINVAL', op, `index ${String(index)} (table of ${port.gidTblLen})`);
    return Uint8Array.from(this.device._provider(op).queryGid(this.device.info, portNum, index));
  }

  /**
   * `ibv_query_gid_type()`: the type of GID `index` (IB, RoCE v1, RoCE v2).
   * @throws RdmaError EINVAL as {@link queryGid}.
   */
  queryGidType(portNum: number, index: number): GidType {
    const op = 'ibv_query_gid_type';
    const port = this.queryPort(portNum);
    if (!Number.isInteger(index) || index < 0 || index >= port.gidTblLen) throw err('EINVAL', op, `index ${String(index)} (table of ${port.gidTblLen})`);
    const p = this.device._provider(op);
    if (p.queryGidType) return p.queryGidType(this.device.info, portNum, index);
    return port.linkLayer === LinkLayer.INFINIBAND ? GidType.IB : GidType.ROCE_V2;
  }

  /**
   * `ibv_query_pkey()`: entry `index` of the port's P_Key table (RoCE: one entry, the default
   * P_Key 0xFFFF). iWARP devices have no table (`pkeyTblLen` 0): always EINVAL, as siw.
   * @throws RdmaError EINVAL for a bad port or an index outside 0..`pkeyTblLen`-1.
   */
  queryPkey(portNum: number, index: number): number {
    const op = 'ibv_query_pkey';
    const port = this.queryPort(portNum);
    if (!Number.isInteger(index) || index < 0 || index >= port.pkeyTblLen) throw err('EINVAL', op, `index ${String(index)} (table of ${port.pkeyTblLen})`);
    const p = this.device._provider(op);
    return p.queryPkey ? p.queryPkey(this.device.info, portNum, index) : DEFAULT_PKEY;
  }

  /**
   * `ibv_get_pkey_index()`: the index of `pkey` in the port's P_Key table, searched from index 0
   * as libibverbs does (`ibv_query_pkey` until it matches).
   * @throws RdmaError EINVAL for a bad port; ENOENT when the table has no such P_Key (libibverbs
   *   reads past the table's last sysfs entry: ENOENT), e.g. on iWARP devices, which have none.
   */
  getPkeyIndex(portNum: number, pkey: number): number {
    const op = 'ibv_get_pkey_index';
    this._checkPort(portNum, op);
    const len = this.queryPort(portNum).pkeyTblLen;
    for (let i = 0; i < len; i++) if (this.queryPkey(portNum, i) === pkey) return i;
    throw err('ENOENT', op, `P_Key 0x${(pkey >>> 0).toString(16)} not in the table of port ${portNum}`);
  }

  /**
   * `ibv_query_gid_table()`: every valid GID entry of every port, with its index, port, type and
   * the interface index of its net device (cache.c `rdma_query_gid_table`). A zero GID is no
   * entry (cache.c `add_modify_gid` stores none), so siw on loopback, whose GID is its zero MAC,
   * reports none. The entries of ports that are not RoCE (iWARP) have type IB, as the kernel's
   * `config_non_roce_gid_cache` makes them.
   * @param maxEntries room for this many entries: EINVAL when the table holds more (as the
   *   kernel); default: no limit.
   * @throws RdmaError EINVAL (a bad or too small `maxEntries`).
   */
  queryGidTable(maxEntries?: number): GidEntry[] {
    const op = 'ibv_query_gid_table';
    if (maxEntries !== undefined && (!Number.isInteger(maxEntries) || maxEntries < 0)) throw err('EINVAL', op, `max_entries ${String(maxEntries)}`);
    const out: GidEntry[] = [];
    const iwarp = this.device.transportType === TransportType.IWARP;
    const ndevIfindex = ifindexOf(this.device.info.ifname);
    for (let port = 1; port <= this._attr.physPortCnt; port++) {
      const len = this.queryPort(port).gidTblLen;
      for (let i = 0; i < len; i++) {
        const gid = this.queryGid(port, i);
        if (gid.every((b) => b === 0)) continue;
        if (maxEntries !== undefined && out.length >= maxEntries) throw err('EINVAL', op, `more than ${maxEntries} entries`);
        out.push({ gid, gidIndex: i, portNum: port, gidType: iwarp ? GidType.IB : this.queryGidType(port, i), ndevIfindex });
      }
    }
    return out;
  }

  /** @internal EINVAL unless `portNum` is one of the device's ports (1..`physPortCnt`). */
  _checkPort(portNum: number, op: string): void {
    if (!Number.isInteger(portNum) || portNum < 1 || portNum > this._attr.physPortCnt) throw err('EINVAL', op, `port ${String(portNum)}`);
  }

  /**
   * The device's counters on port `portNum`, by name — what `rdma statistic show link
   * DEV/PORT` shows (rxe's hw counters and the soft RoCE device's own, the soft iWARP device's
   * after the kernel's iWARP NICs, the kernel's for a native device; docs/counters.md). A copy:
   * read it again for new values.
   * @throws RdmaError EINVAL for a bad port, EOPNOTSUPP for a device without counters.
   */
  queryCounters(portNum = 1): Record<string, number> {
    const op = 'rdma_statistic';
    this._checkAlive(op);
    this._checkPort(portNum, op);
    const p = this.device._provider(op);
    if (p.counters === undefined) throw err('EOPNOTSUPP', op, `${this.device.name} has no counters`);
    return p.counters(this.device.info, portNum);
  }

  /**
   * `ibv_alloc_pd()`.
   * @throws RdmaError ENOMEM beyond `maxPd` PDs.
   */
  allocPd(): Pd {
    this._checkAlive('ibv_alloc_pd');
    if (this._pdCount >= this._attr.maxPd) throw err('ENOMEM', 'ibv_alloc_pd', `more than ${this._attr.maxPd} PDs`);
    this._pdCount++;
    return new Pd(this, this._nextPdHandle++);
  }

  /** `ibv_create_comp_channel()`. */
  createCompChannel(): CompChannel {
    this._checkAlive('ibv_create_comp_channel');
    const ch = new CompChannel(this);
    this._channels.add(ch);
    return ch;
  }

  /**
   * `ibv_create_cq()`.
   * @param cqe minimum number of entries, 1..maxCqe (rounded as the device rounds its queue: siw up to a power of two, rxe to one less than the power of two above).
   * @param channel completion channel for notifications (same context); `null`/`undefined`: none.
   * @param compVector 0..numCompVectors-1 (no effect in this implementation).
   * @param cqContext opaque user value (`cq_context`).
   * @throws RdmaError EINVAL (cqe out of range, bad channel or vector); ENOMEM beyond `maxCq`.
   */
  createCq(cqe: number, channel?: CompChannel | null, compVector = 0, cqContext?: unknown): Cq {
    const op = 'ibv_create_cq';
    const ch = channel ?? undefined;
    this._checkAlive(op);
    if (!Number.isInteger(cqe) || cqe < 1 || cqe > this._attr.maxCqe) {
      throw err('EINVAL', op, `cqe ${String(cqe)} (device max ${this._attr.maxCqe})`);
    }
    if (ch !== undefined) {
      if (!(ch instanceof CompChannel) || ch.context !== this) throw err('EINVAL', op, 'channel of another device');
      if (ch.destroyed) throw err('EINVAL', op, 'channel destroyed');
    }
    if (!Number.isInteger(compVector) || compVector < 0 || compVector >= this.numCompVectors) {
      throw err('EINVAL', op, `comp_vector ${String(compVector)}`);
    }
    if (this._cqCount >= this._attr.maxCq) throw err('ENOMEM', op, `more than ${this._attr.maxCq} CQs`);
    this._cqCount++;
    const cq = new Cq(this, cqe, ch, compVector, cqContext, this._nextCqHandle++);
    ch?._cqs.add(cq);
    return cq;
  }

  /**
   * `ibv_create_cq_ex()`: a CQ with the poll-by-field interface (cq-ex.ts); `cq.cq` is the
   * ordinary CQ QPs and channels use (`ibv_cq_ex_to_cq`). See ex-verbs.ts for the checks.
   * @throws RdmaError EOPNOTSUPP (a device without it — siw —, `wc_flags` the device does not
   *   serve, e.g. completion timestamps); as {@link createCq} otherwise.
   */
  createCqEx(attr: CqInitAttrEx): CqEx {
    return createCqEx(this, attr);
  }

  /**
   * `ibv_create_qp_ex()`: with `comp_mask` PD only, `ibv_create_qp`; with SEND_OPS_FLAGS (or
   * CREATE_FLAGS), a QP with the `ibv_wr_*` builder (`qpToQpEx(qp)`, qp-ex.ts).
   * @throws RdmaError EINVAL, EOPNOTSUPP (see ex-verbs.ts), or what `ibv_create_qp` throws.
   */
  createQpEx(attr: QpInitAttrEx): Qp {
    return createQpEx(this, attr);
  }

  /**
   * `ibv_query_device_ex()`: `struct ibv_device_attr_ex` (a fresh copy): the soft devices give
   * what the kernel's siw and rxe give (device-attr-ex.ts), the native backend rdma-core's answer.
   * @throws RdmaError EINVAL for `input.compMask` other than 0.
   */
  queryDeviceEx(input?: { compMask: number }): DeviceAttrEx {
    return queryDeviceEx(this, input);
  }

  /**
   * `ibv_get_async_event()`: the next async event, waiting if none is queued.
   * @throws AbortError (`code` `'ABORT_ERR'`, the reason as `cause`) when `signal` aborts.
   */
  async getAsyncEvent(signal?: AbortSignal): Promise<AsyncEvent> {
    // A reader waiting is someone listening: a soft device watches its interface meanwhile.
    const release = this._portWatch?.hold();
    try {
      return await this._async.get(signal);
    } finally {
      release?.();
    }
  }

  /** Non-blocking `ibv_get_async_event()`: the next queued event or `undefined`. */
  tryGetAsyncEvent(): AsyncEvent | undefined {
    return this._async.tryGet();
  }

  /**
   * `ibv_ack_async_event()`.
   * @throws RdmaError EINVAL if the event was not read from this context or is already acked.
   */
  ackAsyncEvent(ev: AsyncEvent): void {
    this._async.ack(ev);
  }

  /**
   * `ibv_close_device()`. The context is the device's per-process singleton, shared by everyone
   * who opened it — the CM opens it for each id it binds to the device, rsockets through the CM —
   * so, as librdmacm counts its users of a device (cma.c `ucma_get_device`/`ucma_put_device`), it
   * is open while any `Device.open()` is not yet matched by a `close()`. Once closed, every call
   * that makes an object from the context or from its objects (`allocPd`, `createCq`,
   * `createCompChannel`, `createCqEx`, `createQpEx`, `pd.regMr`, `pd.allocMw`, `pd.createQp`,
   * `pd.createAh`, `pd.createSrq`) and the device, port and GID queries fail with EBADF, as the
   * kernel answers a command written to a closed device file. Closing destroys nothing (the
   * kernel would destroy every object of a closed device file): objects made before keep working
   * until they are destroyed — destroy them first, as `using` does in reverse order of creation.
   * The next `Device.open()` opens it again. Closing a closed context does nothing; close each
   * open once (`using ctx = device.open()` does).
   */
  close(): void {
    if (this._opens > 0) this._opens--;
  }

  /** True once every `Device.open()` has been matched by a {@link close}. */
  get closed(): boolean {
    return this._opens === 0;
  }

  /** `using ctx = device.open()`: {@link close} at the end of the scope. */
  [Symbol.dispose](): void {
    this.close();
  }

  /** @internal `Device.open()` hands the singleton out (once more). */
  _open(): void {
    this._opens++;
  }

  /**
   * @internal Keep watching the device's interface (port events, removal) until the returned
   * function is called: the CM holds it for each id bound to the device. A no-op for devices
   * that are not soft devices.
   */
  _holdPortWatch(): () => void {
    return this._portWatch?.hold() ?? ((): void => undefined);
  }

  /** @internal The set of live QPs changed: a context with QPs watches its interface. */
  _qpsChanged(): void {
    if (this._qps.size > 0 && this._qpHold === null) this._qpHold = this._holdPortWatch();
    else if (this._qps.size === 0 && this._qpHold !== null) {
      this._qpHold();
      this._qpHold = null;
    }
  }

  /** Whether the device was removed (DEVICE_FATAL). */
  get removed(): boolean {
    return this._dead;
  }

  /**
   * @internal The device is gone (its interface unregistered): from now on the calls that make
   * objects or query the device fail with EIO, as uverbs answers once a device is disassociated.
   */
  _disassociate(): void {
    this._dead = true;
  }

  /**
   * @internal EBADF once closed (the kernel's answer to a command written to a closed device
   * file), EIO once the device is removed.
   */
  _checkAlive(op: string): void {
    this._checkOpen(op);
    if (this._dead) throw err('EIO', op, `device ${this.device.name} was removed`);
  }

  /** @internal EBADF once closed. */
  _checkOpen(op: string): void {
    if (this._opens === 0) throw err('EBADF', op, `context of ${this.device.name} closed`);
  }

  /** @internal Raise an async event (transport/CQ side). */
  _raiseAsyncEvent(ev: AsyncEvent): void {
    this._async.raise(ev);
  }

  /**
   * @internal Allocate a QP number for a new QP: numbers count up from 1 (wrapping at 2^24) and
   * skip those in use — in {@link _qps} or handed out and not yet registered. A number becomes
   * free again when its QP leaves `_qps`.
   * @throws RdmaError ENOMEM beyond `maxQp` live QPs.
   */
  _allocQpNum(): number {
    if (this._qps.size + this._qpNumPending.size >= this._attr.maxQp) {
      throw err('ENOMEM', 'ibv_create_qp', `more than ${this._attr.maxQp} QPs`);
    }
    let n = this._qpNumNext;
    while (this._qps.has(n) || this._qpNumPending.has(n)) n = n >= MAX_QP_NUM ? 1 : n + 1;
    this._qpNumNext = n >= MAX_QP_NUM ? 1 : n + 1;
    this._qpNumPending.add(n);
    return n;
  }

  /** @internal `Pd.createQp` is done with the numbers allocated during the provider call. */
  _qpNumSettled(): void {
    this._qpNumPending.clear();
  }

  /** @internal Events read for `obj` (a QP, CQ or SRQ) and not yet acknowledged. */
  _unackedAsyncEvents(obj: object): number {
    return this._async.unacked(obj);
  }

  /** @internal Drop unread async events of a destroyed object. */
  _purgeAsyncEvents(obj: object): void {
    this._async.purge(obj);
  }

  /** @internal The handle of a new SRQ (per context, counting up from 1). */
  _nextSrqHandle(): number {
    return this._srqHandle++;
  }

  /** @internal */
  _pdDeallocated(pd: Pd): void {
    this._pdSet.delete(pd);
    this._pdCount--;
  }

  /** @internal */
  _cqDestroyed(cq: Cq): void {
    this._cqSet.delete(cq);
    this._cqCount--;
  }

  /** @internal */
  _compChannelDestroyed(ch: CompChannel): void {
    this._channels.delete(ch);
  }
}
