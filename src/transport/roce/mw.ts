/**
 * Memory windows on the soft RoCE device, as rdma_rxe and rdma-core's rxe provider have them:
 * types 1 and 2B (`max_mw`, IBV_DEVICE_MEM_WINDOW and IBV_DEVICE_MEM_WINDOW_TYPE_2B in its
 * attributes). The windows themselves and their rules are the verbs layer's (verbs/mw.ts); this
 * is the provider's part — which types it allocates (rxe_alloc_mw: both) and how `ibv_bind_mw`
 * reaches the device (providers/rxe/rxe.c `rxe_bind_mw`: a BIND_MW work request on the QP).
 * The requester executes BIND_MW and LOCAL_INV (rc/req.ts, rxe_do_local_ops), the responder
 * checks rkeys that name windows and SEND_WITH_INV that frees them (rc/resp.ts).
 */
import { err, PostError, RdmaError } from '../../errors.js';
import type { Context } from '../../verbs/context.js';
import { incRkey, type Mw } from '../../verbs/mw.js';
import type { Pd } from '../../verbs/pd.js';
import type { Qp } from '../../verbs/qp.js';
import { Access, WrOpcode, type MwBind, type MwType } from '../../verbs/types.js';

/** rxe_alloc_mw: type 1 and type 2 windows alike (the verbs layer has checked the type). */
export function rxeAllocMw(_ctx: Context, _pd: Pd, _type: MwType): void {
  // Nothing to refuse: rxe takes both types, and the window is the verbs layer's object.
}

/**
 * rdma-core's rxe `rxe_bind_mw`: a zero-based type 1 window is refused (EINVAL); otherwise a
 * BIND_MW work request (wr_id and send_flags of `bind`, the window, the rkey with its key byte
 * increased, bind_info) is posted on `qp`, whose errno is the call's. Returns that rkey.
 */
export function rxeBindMw(qp: Qp, mw: Mw, bind: MwBind): number {
  const op = 'ibv_bind_mw';
  if (bind.bindInfo.mwAccessFlags & Access.ZERO_BASED) throw err('EINVAL', op, 'type 1 windows cannot be zero based');
  const rkey = incRkey(mw.rkey);
  const wr = { wrId: bind.wrId, opcode: WrOpcode.BIND_MW, sgList: [], bindMw: { mw, rkey, bindInfo: bind.bindInfo } };
  try {
    qp.postSend(bind.sendFlags === undefined ? wr : { ...wr, sendFlags: bind.sendFlags });
  } catch (e) {
    if (e instanceof PostError) throw new RdmaError(e.code, { op, detail: e.message, cause: e });
    throw e;
  }
  return rkey;
}
