/**
 * The QP of one CM id: rdma_create_qp (the QP, its CQs and completion channels when not given,
 * moved to INIT with the attributes rdma_init_qp_attr gives, UD on to RTS), rdma_destroy_qp, the
 * QP a connect or accept hands to the transport (the id's, or one named by `qpNum`), and that
 * QP's move to ERR when the connect fails (librdmacm's `ucma_modify_qp_err`).
 */
import { err } from '../errors.js';
import type { Context } from '../verbs/context.js';
import type { Pd } from '../verbs/pd.js';
import type { Cq } from '../verbs/cq.js';
import type { CompChannel } from '../verbs/comp-channel.js';
import type { Qp } from '../verbs/qp.js';
import { QpAttrMask } from '../verbs/qp-attr.js';
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
}

/** The PD rdma_create_qp uses when given none: one per device context. */
const defaultPds = new WeakMap<Context, Pd>();

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
    let thePd = pd;
    if (!thePd) {
      thePd = defaultPds.get(ctx) ?? ctx.allocPd();
      defaultPds.set(ctx, thePd);
    }
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
      const init = { qpType, sendCq, recvCq, cap, sqSigAll: attr.sqSigAll ?? false, qpContext: attr.qpContext };
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
