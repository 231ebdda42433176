/**
 * Address handles (`ibv_create_ah`, `ibv_destroy_ah`): where a UD send goes. The verbs layer
 * checks the attribute shape (`struct ibv_ah_attr`) and the PD; the device's provider checks it
 * against its ports and GID table and keeps whatever it needs to address the packet (for RoCEv2:
 * the destination IP derived from the GID). A provider without address handles (iWARP) refuses
 * with EOPNOTSUPP, as siw (no `create_ah`).
 */
import { err } from '../errors.js';
import type { Pd } from './pd.js';

/** `struct ibv_global_route`: the GRH fields (RoCE always needs them). */
export interface GlobalRoute {
  /** `dgid`: destination GID, 16 bytes. */
  dgid: Uint8Array;
  /** `flow_label`: 20 bits. */
  flowLabel: number;
  /** `sgid_index`: the source GID's index in the port's GID table. */
  sgidIndex: number;
  /** `hop_limit`: 8 bits (IPv4 TTL / IPv6 hop limit on RoCEv2). */
  hopLimit: number;
  /** `traffic_class`: 8 bits (IPv4 TOS / IPv6 traffic class on RoCEv2). */
  trafficClass: number;
}

/** `struct ibv_ah_attr`. */
export interface AhAttr {
  /** `dlid`: destination LID (InfiniBand; 0 on RoCE). */
  dlid?: number;
  /** `sl`: service level, 4 bits. */
  sl?: number;
  /** `src_path_bits`. */
  srcPathBits?: number;
  /** `static_rate` (`enum ibv_rate`). */
  staticRate?: number;
  /** `is_global`: a GRH is present ({@link grh} is required). */
  isGlobal: boolean;
  /** `port_num`: the local port, from 1. */
  portNum: number;
  /** `grh`, when {@link isGlobal}. */
  grh?: GlobalRoute;
}

/**
 * Check the shape of an {@link AhAttr} (field ranges as `struct ibv_ah_attr` holds them);
 * returns a reason string, or null when well formed. Device-specific checks (port number, GID
 * index, GRH required) are the provider's.
 */
export function ahAttrProblem(a: AhAttr): string | null {
  if (typeof a !== 'object' || a === null) return 'no attributes';
  const u = (v: unknown, bits: number): boolean => v === undefined || (Number.isInteger(v) && (v as number) >= 0 && (v as number) < 2 ** bits);
  if (!u(a.dlid, 16)) return `dlid ${String(a.dlid)}`;
  if (!u(a.sl, 4)) return `sl ${String(a.sl)}`;
  if (!u(a.srcPathBits, 7)) return `src_path_bits ${String(a.srcPathBits)}`;
  if (!u(a.staticRate, 8)) return `static_rate ${String(a.staticRate)}`;
  if (typeof a.isGlobal !== 'boolean') return 'is_global must be a boolean';
  if (!Number.isInteger(a.portNum) || a.portNum < 1 || a.portNum > 255) return `port_num ${String(a.portNum)}`;
  if (a.isGlobal) {
    const g = a.grh;
    if (typeof g !== 'object' || g === null) return 'is_global without grh';
    if (!(g.dgid instanceof Uint8Array) || g.dgid.length !== 16) return 'grh.dgid must be 16 bytes';
    if (!u(g.flowLabel, 20)) return `grh.flow_label ${String(g.flowLabel)}`;
    if (!u(g.sgidIndex, 8)) return `grh.sgid_index ${String(g.sgidIndex)}`;
    if (!u(g.hopLimit, 8)) return `grh.hop_limit ${String(g.hopLimit)}`;
    if (!u(g.trafficClass, 8)) return `grh.traffic_class ${String(g.trafficClass)}`;
  }
  return null;
}

/** A private copy of an {@link AhAttr} (the caller may reuse its object and GID buffer). */
export function copyAhAttr(a: AhAttr): AhAttr {
  const c: AhAttr = { isGlobal: a.isGlobal, portNum: a.portNum };
  if (a.dlid !== undefined) c.dlid = a.dlid;
  if (a.sl !== undefined) c.sl = a.sl;
  if (a.srcPathBits !== undefined) c.srcPathBits = a.srcPathBits;
  if (a.staticRate !== undefined) c.staticRate = a.staticRate;
  if (a.grh) c.grh = { ...a.grh, dgid: Uint8Array.from(a.grh.dgid) };
  return c;
}

/** `struct ibv_ah`. Create with `pd.createAh(attr)`. */
export class Ah {
  /** The attributes, as given (a private copy). */
  readonly attr: Readonly<AhAttr>;
  /** The protection domain. */
  readonly pd: Pd;
  /** Per-PD handle, for traces. */
  readonly handle: number;
  /** @internal Whatever the provider returned for this AH (its resolved destination). */
  readonly _provider: unknown;
  private _destroyed = false;

  /** @internal Use `Pd.createAh()`. */
  constructor(pd: Pd, attr: AhAttr, handle: number, providerData: unknown) {
    this.pd = pd;
    this.attr = Object.freeze(attr);
    this.handle = handle;
    this._provider = providerData;
  }

  /** True after {@link destroy}. */
  get destroyed(): boolean {
    return this._destroyed;
  }

  /**
   * `ibv_destroy_ah()`. Sends already posted with this AH are unaffected (the provider resolved
   * the destination when they were posted).
   * @throws RdmaError EINVAL if already destroyed.
   */
  destroy(): void {
    if (this._destroyed) throw err('EINVAL', 'ibv_destroy_ah', 'already destroyed');
    this._destroyed = true;
    this.pd._ahDestroyed(this);
  }

  /**
   * `using` / `await using`: `ibv_destroy_ah()` at the end of the scope; nothing if already
   * destroyed.
   * @throws RdmaError what {@link destroy} throws (the device's errno): disposal reports, never
   *   leaks silently.
   */
  [Symbol.dispose](): void {
    if (!this._destroyed) this.destroy();
  }
}
