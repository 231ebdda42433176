/**
 * The QP of one CM id: rdma_create_qp / rdma_create_qp_ex (the QP, its CQs and completion
 * channels when not given, moved to INIT with the attributes rdma_init_qp_attr gives, UD on to
 * RTS; on the id's SRQ when it has one), rdma_destroy_qp, the QP a connect or accept hands to the
 * transport (the id's, or one named by `qpNum`), and that QP's move to ERR when the connect fails
 * (librdmacm's `ucma_modify_qp_err`); the id's SRQ (rdma_create_srq / rdma_create_srq_ex /
 * rdma_destroy_srq).
 */
import { err } from '../errors.js';
import type { Context } from '../verbs/context.js';
import type { Pd } from '../verbs/pd.js';
import type { Cq } from '../verbs/cq.js';
import type { CompChannel } from '../verbs/comp-channel.js';
import type { Qp } from '../verbs/qp.js';
import { SrqInitAttrMask, SrqType, type Srq, type SrqInitAttr } from '../verbs/srq.js';
import { QpAttrMask } from '../verbs/qp-attr.js';
import { QpInitAttrMask, qpExSendOps } from '../verbs/ex-verbs.js';
import { attachQpEx } from '../verbs/qp-ex.js';
import { QpState, QpType, type QpCap } from '../verbs/types.js';
import type { ConnParam } from './events.js';
import type { CmEndpoint } from './transport.js';

/** QP attributes for rdma_create_qp (`struct ibv_qp_init_attr`). */
export interface CmQpInitAttr {
  sendCq?: Cq;
  recvCq?: Cq;
  cap?: Partial<QpCap>;
  /** Default: the id's (UD for UDP/IPOIB port spaces, else RC). */
  qpType?: QpType;
  sqSigAll?: boolean;
  qpContext?: unknown;
  /** The SRQ the QP takes its receives from; default: the id's (`id.srq`), as librdmacm. */
  srq?: Srq | null;
}

/** `enum ibv_qp_init_attr_mask`: the verbs layer's (ex-verbs.ts). */
export { QpInitAttrMask };

/** rdma_create_qp_ex's attributes (`struct ibv_qp_init_attr_ex`). */
export interface CmQpInitAttrEx extends CmQpInitAttr {
  /** `comp_mask`: {@link QpInitAttrMask} bits saying which of the fields below are valid. */
  compMask: number;
  /** With `QpInitAttrMask.PD`: the PD (null or absent: the id's). */
  pd?: Pd | null;
  /** With `QpInitAttrMask.CREATE_FLAGS`: `enum ibv_qp_create_flags`. */
  createFlags?: number;
  /** With `QpInitAttrMask.SEND_OPS_FLAGS`: the `ibv_wr_*` builder calls the QP is for (`QpExSendOps`). */
  sendOpsFlags?: number;
}

/** rdma_create_srq_ex's attributes (`struct ibv_srq_init_attr_ex`). */
export interface CmSrqInitAttrEx extends SrqInitAttr {
  /** `comp_mask`: `SrqInitAttrMask` bits; TYPE is required (librdmacm: EINVAL without it). */
  compMask: number;
  /** With `SrqInitAttrMask.PD`: the PD (null or absent: the id's). */
  pd?: Pd | null;
}

/** The PD rdma_create_qp uses when given none: one per device context. */
const defaultPds = new WeakMap<Context, Pd>();

/** The device's default PD (librdmacm's `cma_dev->pd`). */
function defaultPd(ctx: Context): Pd {
  let pd = defaultPds.get(ctx);
  if (!pd) {
    pd = ctx.allocPd();
    defaultPds.set(ctx, pd);
  }
  return pd;
}

/** A CQ and its completion channel that rdma_create_qp made. */
interface MadeCq {
  cq: Cq;
  ch: CompChannel;
}

function destroyMade(made: readonly MadeCq[]): void {
  for (const m of made) {
    m.cq.destroy();
    m.ch.destroy();
  }
}

/** The id's QP and what came with it. */
export class IdQp {
  pd: Pd | null = null;
  qp: Qp | null = null;
  /** The SRQ rdma_create_srq made (`id->srq`). */
  srq: Srq | null = null;
  sendCq: Cq | null = null;
  recvCq: Cq | null = null;
  sendCqChannel: CompChannel | null = null;
  recvCqChannel: CompChannel | null = null;
  /** The CQs and channels were made by rdma_create_qp (rdma_destroy_qp destroys them). */
  private ownsCqs = false;
  /** The QP handed to the transport by connect/accept (the id's, or one named by `qpNum`). */
  private connQp: Qp | null = null;

  /**
   * rdma_create_qp on `ctx`, through the endpoint `ep` when it makes QPs itself (`idQpType`: the
   * id's type, when `attr` names none). EINVAL if the id has a QP already or `pd` is of another
   * device; whatever the device's provider throws (nothing is left behind then).
   */
  create(ctx: Context, ep: CmEndpoint | null, pd: Pd | null, attr: CmQpInitAttr, idQpType: QpType, op: string): Qp {
    if (this.qp) throw err('EINVAL', op, 'id already has a QP');
    if (pd && pd.context !== ctx) throw err('EINVAL', op, 'PD of another device');
    const qpType = attr.qpType ?? idQpType;
    const thePd = pd ?? defaultPd(ctx);
    // librdmacm's rdma_create_qp_ex: `if (id->srq && !attr->srq) attr->srq = id->srq`.
    const srq = attr.srq ?? this.srq;
    const cap = { maxSendWr: 1, maxRecvWr: 1, maxSendSge: 1, maxRecvSge: 1, maxInlineData: 0, ...attr.cap };
    let sendCq = attr.sendCq;
    let recvCq = attr.recvCq;
    const made: MadeCq[] = [];
    if (!sendCq) {
      const ch = ctx.createCompChannel();
      sendCq = ctx.createCq(Math.max(cap.maxSendWr, 1), ch);
      made.push({ cq: sendCq, ch });
      this.sendCqChannel = ch;
    }
    if (!recvCq) {
      const ch = ctx.createCompChannel();
      recvCq = ctx.createCq(Math.max(cap.maxRecvWr, 1), ch);
      made.push({ cq: recvCq, ch });
      this.recvCqChannel = ch;
    }
    let qp: Qp;
    try {
      const init = { qpType, sendCq, recvCq, cap, sqSigAll: attr.sqSigAll ?? false, qpContext: attr.qpContext, ...(srq ? { srq } : {}) };
      qp = ep?.createQp ? ep.createQp(thePd, init) : (thePd.createQp(init) as Qp);
    } catch (e) {
      destroyMade(made);
      this.sendCqChannel = null;
      this.recvCqChannel = null;
      throw e;
    }
    try {
      initQp(qp, ep);
    } catch (e) {
      qp.destroy();
      destroyMade(made);
      this.sendCqChannel = null;
      this.recvCqChannel = null;
      throw e;
    }
    this.ownsCqs = made.length > 0;
    this.pd = thePd;
    this.qp = qp;
    this.sendCq = sendCq;
    this.recvCq = recvCq;
    return qp;
  }

  /**
   * rdma_create_qp_ex: `comp_mask` says which fields are valid. PD: the one given, else the id's
   * (EINVAL for a PD of another device). Any other bit makes it the provider's `create_qp_ex`
   * (libibverbs' `ibv_create_qp_ex`, checked by the verbs layer's `qpExSendOps`): siw has none
   * (EOPNOTSUPP); rxe and the native backend take CREATE_FLAGS (none non-zero) and
   * SEND_OPS_FLAGS, whose QP gets the `ibv_wr_*` builder (`qpToQpEx(id.qp)`).
   */
  createEx(ctx: Context, ep: CmEndpoint | null, attr: CmQpInitAttrEx, idQpType: QpType, op: string): Qp {
    if (typeof attr !== 'object' || attr === null) throw err('EINVAL', op, 'no init attributes');
    const m = attr.compMask;
    if (!Number.isInteger(m) || m < 0 || m > 0xffff_ffff) throw err('EINVAL', op, `comp_mask ${String(m)}`);
    if (this.qp) throw err('EINVAL', op, 'id already has a QP');
    // Without a PD: the id's, which librdmacm's ids have from the device (`cma_dev->pd`).
    const pd = m & QpInitAttrMask.PD && attr.pd ? attr.pd : null;
    if (pd && pd.context !== ctx) throw err('EINVAL', op, 'PD of another device');
    const exAttr: { compMask: number; qpType: QpType; createFlags?: number; sendOpsFlags?: number } = { compMask: m, qpType: attr.qpType ?? idQpType };
    if (attr.createFlags !== undefined) exAttr.createFlags = attr.createFlags;
    if (attr.sendOpsFlags !== undefined) exAttr.sendOpsFlags = attr.sendOpsFlags;
    const ops = qpExSendOps(ctx, exAttr, op);
    const qp = this.create(ctx, ep, pd, attr, idQpType, op);
    if (ops !== null) attachQpEx(qp, ops);
    return qp;
  }

  /**
   * rdma_create_srq_ex (librdmacm cma.c): EINVAL without `SrqInitAttrMask.TYPE`; the PD given,
   * else the id's (the device's default PD, `cma_dev->pd`, as for rdma_create_qp).
   * Then `ibv_create_srq_ex`: a mask beyond TYPE and PD, or a type other than BASIC, goes to the
   * provider's `create_srq_ex`, which rxe and siw lack: EOPNOTSUPP. EINVAL if the id has an SRQ
   * already (an id has one SRQ, rdma_create_srq(3)).
   */
  createSrqEx(ctx: Context, attr: CmSrqInitAttrEx, op: string): Srq {
    if (typeof attr !== 'object' || attr === null) throw err('EINVAL', op, 'no init attributes');
    const m = attr.compMask;
    if (!Number.isInteger(m) || m < 0 || !(m & SrqInitAttrMask.TYPE)) throw err('EINVAL', op, 'comp_mask without IBV_SRQ_INIT_ATTR_TYPE');
    if (this.srq) throw err('EINVAL', op, 'id already has an SRQ');
    const pd = m & SrqInitAttrMask.PD && attr.pd ? attr.pd : defaultPd(ctx);
    if (pd.context !== ctx) throw err('EINVAL', op, 'PD of another device');
    if (m & ~(SrqInitAttrMask.TYPE | SrqInitAttrMask.PD)) throw err('EOPNOTSUPP', op, `comp_mask 0x${m.toString(16)}`);
    if ((attr.srqType ?? SrqType.BASIC) !== SrqType.BASIC) throw err('EOPNOTSUPP', op, `srq_type ${String(attr.srqType)}`);
    const init: SrqInitAttr = { attr: attr.attr, srqType: SrqType.BASIC };
    if (attr.srqContext !== undefined) init.srqContext = attr.srqContext;
    const srq = pd.createSrq(init);
    this.srq = srq;
    return srq;
  }

  /**
   * rdma_destroy_srq: `ibv_destroy_srq` of the id's SRQ. EBUSY (the id keeps it) while a QP uses
   * it; librdmacm, a void call, drops the SRQ from the id whatever ibv_destroy_srq said.
   */
  destroySrq(): void {
    const srq = this.srq;
    if (!srq) return;
    srq.destroy();
    this.srq = null;
  }

  /** rdma_destroy_qp: destroy the QP and the CQs/channels rdma_create_qp made. */
  destroy(): void {
    const qp = this.qp;
    if (!qp) return;
    this.qp = null;
    try {
      qp.destroy();
    } catch {
      /* already destroyed by the user */
    }
    if (this.ownsCqs) {
      for (const [cq, ch] of [
        [this.sendCq, this.sendCqChannel],
        [this.recvCq, this.recvCqChannel],
      ] as const) {
        if (cq && ch) {
          try {
            cq.destroy();
            ch.destroy();
          } catch {
            /* the user still holds events; leave them */
          }
        }
      }
    }
    this.sendCqChannel = this.recvCqChannel = null;
    this.sendCq = this.recvCq = null;
  }

  /** The QP a connect/accept uses: the id's, or the one `param.qpNum` names on `ctx` (null if neither). */
  qpFor(param: ConnParam | undefined, ctx: Context | null): Qp | null {
    if (this.qp) return this.qp;
    if (param?.qpNum !== undefined && ctx) {
      const q = ctx._qps.get(param.qpNum);
      if (q) return q as Qp;
    }
    return null;
  }

  /** A connect or accept hands `qp` to the transport. */
  handOver(qp: Qp | null): void {
    this.connQp = qp;
  }

  /** The transport has the QP no more: the connect call failed, or the id is destroyed. */
  release(): void {
    this.connQp = null;
  }

  /** The connect failed (REJECTED, UNREACHABLE, CONNECT_ERROR): the QP handed over goes to ERR, as librdmacm moves it. */
  connectFailed(): void {
    const qp = this.connQp;
    this.connQp = null;
    if (qp && qp.state !== QpState.RESET && qp.state !== QpState.ERR) qp.modify({ qpState: QpState.ERR });
  }
}

/**
 * librdmacm's `ucma_init_conn_qp` / `ucma_init_ud_qp`: INIT with rdma_init_qp_attr's
 * attributes; a UD QP goes on to RTR and RTS (SQ PSN 0), since nothing else will move it.
 */
function initQp(qp: Qp, ep: CmEndpoint | null): void {
  if (qp.state !== QpState.RESET) return;
  if (!ep) {
    qp.modify({ qpState: QpState.INIT });
    return;
  }
  const init = ep.initQpAttr(QpState.INIT);
  qp.modify(init.attr, init.mask);
  if (qp.qpType === QpType.UD) {
    qp.modify({ qpState: QpState.RTR }, QpAttrMask.STATE);
    qp.modify({ qpState: QpState.RTS, sqPsn: 0 }, QpAttrMask.STATE | QpAttrMask.SQ_PSN);
  }
}
