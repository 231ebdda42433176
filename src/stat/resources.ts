/**
 * The RDMA resources of this process — PDs, CQs, MRs, QPs and CM ids of every device it opened —
 * as `rdma resource show` lists a process's kernel objects (iproute2 rdma/res-*.c: the same
 * record names and JSON keys: `pdn`, `cqn`, `mrn`, `lqpn`, `rqpn`, `sq-psn`, `cm-idn` ...).
 * Nothing of a region's memory is ever read: an MR is its keys, length and rights.
 */
import { execFile } from 'node:child_process';
import { basename } from 'node:path';
import { _openContexts } from '../verbs/device.js';
import type { Context } from '../verbs/context.js';
import type { Cq } from '../verbs/cq.js';
import { Qp } from '../verbs/qp.js';
import { Access, QpType, TransportType } from '../verbs/types.js';
import { MigState } from '../verbs/qp-attr.js';
import { getProvider } from '../verbs/provider.js';
import { liveCmIds } from '../cm/id-registry.js';
import { PortSpace } from '../cm/port-space.js';
import type { SockAddr } from '../cm/addr.js';

/** One listed object: iproute2's JSON keys, values as `rdma -j resource show` gives them. */
export type ResourceRecord = Record<string, string | number | string[]>;

/** The resource kinds, as `rdma resource show KIND` names them. */
export const RESOURCE_KINDS = ['qp', 'cm_id', 'mr', 'cq', 'pd'] as const;
export type ResourceKind = (typeof RESOURCE_KINDS)[number];

/** Every kind's records. */
export type Resources = Record<ResourceKind, ResourceRecord[]>;

/** The process as `rdma resource` names an object's owner: its pid and the script's name. */
export function processOwner(): { pid: number; comm: string } {
  const script = process.argv[1];
  return { pid: process.pid, comm: script !== undefined ? basename(script).replace(/\.[cm]?js$/, '') : basename(process.argv0) };
}

const ACCESS_NAMES = Object.entries(Access) as [string, number][];

/** `enum ibv_access_flags` bits by name (`LOCAL_WRITE` ...). */
export function accessNames(bits: number): string[] {
  return ACCESS_NAMES.filter(([, b]) => (bits & b) !== 0).map(([n]) => n);
}

const PS_NAMES: Record<number, string> = { [PortSpace.TCP]: 'TCP', [PortSpace.UDP]: 'UDP', [PortSpace.IB]: 'IB', [PortSpace.IPOIB]: 'IPOIB' };

function addr(a: SockAddr | null): string | undefined {
  if (a === null) return undefined;
  return a.address.includes(':') ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`;
}

/** A memory key as `rdma -j` gives it: hex digits without `0x` (iproute2 print_key; the text view adds it). */
export const keyText = (k: number): string => (k >>> 0).toString(16);

/** `path-mig-state` as iproute2 names it (rdma/res-qp.c path_mig_to_str). */
const MIG_NAMES: Record<number, string> = { [MigState.MIGRATED]: 'MIGRATED', [MigState.REARM]: 'REARM', [MigState.ARMED]: 'ARMED' };

/**
 * A QP of a kernel device (the native backend), with the fields the kernel gives `rdma resource`
 * (core/nldev.c fill_res_qp_entry): the port once the QP has one, the peer QPN, the receive PSN
 * and the path migration state for RC and UC QPs, the send PSN for every QP.
 */
function nativeQpRecord(dev: string, ql: Qp): ResourceRecord {
  const a = ql.query();
  const rcUc = ql.qpType === QpType.RC || ql.qpType === QpType.UC;
  const rec: ResourceRecord = { ifname: dev };
  if ((a.portNum ?? 0) > 0 && a.qpState !== 'RESET') rec['port'] = a.portNum as number;
  rec['lqpn'] = ql.qpNum;
  if (rcUc) rec['rqpn'] = a.destQpNum ?? 0;
  rec['type'] = QpType[ql.qpType] ?? String(ql.qpType);
  rec['state'] = a.qpState ?? 'RESET';
  if (rcUc) rec['rq-psn'] = a.rqPsn ?? 0;
  rec['sq-psn'] = a.sqPsn ?? 0;
  if (rcUc) rec['path-mig-state'] = MIG_NAMES[a.pathMigState ?? MigState.MIGRATED] ?? String(a.pathMigState);
  return rec;
}

/** The uses of a CQ, as the kernel counts a CQ's `usecnt`: one per QP for its send CQ, one for its receive CQ. */
function cqUsers(cq: Cq): number {
  let n = 0;
  for (const q of cq.qps) {
    if (!(q instanceof Qp)) {
      n++;
      continue;
    }
    if (q.sendCq === cq) n++;
    if (q.recvCq === cq) n++;
  }
  return n;
}

function contextResources(ctx: Context, out: Resources, who: { pid: number; comm: string }): void {
  const dev = ctx.device.name;
  const native = getProvider(ctx.device.provider)?.native === true;
  for (const pd of ctx._pdSet) {
    out.pd.push({ ifname: dev, pdn: pd.handle, users: pd._mrs.size + pd._qps.size + pd._srqs.size + pd._ahs.size, ...who });
    for (const mr of pd._mrs) {
      out.mr.push({ ifname: dev, mrn: mr.handle, rkey: keyText(mr.rkey), lkey: keyText(mr.lkey), mrlen: mr.length, access: accessNames(mr.access), pdn: pd.handle, ...who });
    }
    for (const ql of pd._qps.keys()) {
      if (!(ql instanceof Qp) || ctx._qps.get(ql.qpNum) !== ql) continue;
      if (native) {
        out.qp.push({ ...nativeQpRecord(dev, ql), pdn: pd.handle, ...who });
        continue;
      }
      const a = ql.query();
      const iwarp = ctx.device.transportType === TransportType.IWARP;
      const rec: ResourceRecord = { ifname: dev, port: a.portNum || 1, lqpn: ql.qpNum };
      // iWARP QPs have no peer QP number (siw reports none); UD QPs have no peer.
      if (!iwarp && ql.qpType !== QpType.UD) rec['rqpn'] = a.destQpNum ?? 0;
      rec['type'] = QpType[ql.qpType] ?? String(ql.qpType);
      rec['state'] = a.qpState ?? 'RESET';
      // rxe reports the PSNs it is at; siw none (its MSNs come from _resourceInfo).
      if (!iwarp) {
        rec['rq-psn'] = a.rqPsn ?? 0;
        rec['sq-psn'] = a.sqPsn ?? 0;
      }
      Object.assign(rec, ql._resourceInfo());
      rec['pdn'] = pd.handle;
      Object.assign(rec, who);
      out.qp.push(rec);
    }
  }
  for (const cq of ctx._cqSet) {
    out.cq.push({ ifname: dev, cqn: cq.handle, cqe: cq.cqe, users: cqUsers(cq), ...who });
  }
}

/**
 * This process's resources on every device it opened (soft or native: what our objects know;
 * {@link kernelResources} asks the kernel for a native device's own), each kind in creation
 * order per device.
 */
export function listResources(): Resources {
  const out: Resources = { qp: [], cm_id: [], mr: [], cq: [], pd: [] };
  const who = processOwner();
  for (const ctx of _openContexts()) contextResources(ctx, out, who);
  for (const id of liveCmIds()) {
    if (id.destroyed) continue;
    const rec: ResourceRecord = {};
    if (id.verbs !== null) {
      rec['ifname'] = id.verbs.device.name;
      rec['port'] = 1;
    }
    rec['cm-idn'] = id.idn;
    if (id.qp !== null) rec['lqpn'] = id.qp.qpNum;
    rec['qp-type'] = QpType[id.qpType] ?? String(id.qpType);
    rec['state'] = id.state;
    rec['ps'] = PS_NAMES[id.ps] ?? String(id.ps);
    Object.assign(rec, who);
    const src = addr(id.localAddr);
    const dst = addr(id.peerAddr);
    if (src !== undefined) rec['src-addr'] = src;
    if (dst !== undefined) rec['dst-addr'] = dst;
    out.cm_id.push(rec);
  }
  out.cm_id.sort((x, y) => (x['cm-idn'] as number) - (y['cm-idn'] as number));
  return out;
}

/**
 * The kernel's own records of `kind` (every process's native objects the caller may see), from
 * iproute2's `rdma -j resource show KIND`; `null` where the tool is missing, fails or does not
 * answer within `timeoutMs`.
 */
export function kernelResources(kind: ResourceKind, timeoutMs = 3000): Promise<ResourceRecord[] | null> {
  return new Promise((resolve) => {
    execFile('rdma', ['-j', 'resource', 'show', kind], { timeout: timeoutMs }, (e, stdout) => {
      if (e) return resolve(null);
      try {
        const v: unknown = JSON.parse(stdout);
        resolve(Array.isArray(v) ? (v as ResourceRecord[]) : null);
      } catch {
        resolve(null);
      }
    });
  });
}
