/**
 * The ids bound to each device, and what the CM does when a device's interface changes under
 * them: the kernel's cma.c as an `ib_client` — `cma_process_remove` / `cma_send_device_removal_put`
 * (RDMA_CM_EVENT_DEVICE_REMOVAL on every id attached to a device that goes away) and
 * `cma_netdev_callback` / `cma_netdev_change` (RDMA_CM_EVENT_ADDR_CHANGE on the ids bound to an
 * interface whose hardware address is no longer the one they resolved with).
 *
 * An id attaches when it takes a device (bind, resolve, a connect request's new id) and detaches
 * when it is destroyed or takes another. While attached it keeps the device's port watch running
 * (verbs/port-watch.ts), as an id bound to a device is something listening to it. A wildcard
 * listener is attached to no device: it is left alone when one goes (cma_listen_handler destroys
 * only its per-device children), and keeps listening on the others.
 */
import { registerDeviceClient } from '../verbs/port-watch.js';
import type { Context } from '../verbs/context.js';

/** What the CM does to one id (cm-id.ts). */
export interface DeviceBoundId {
  /** DEVICE_REMOVAL (once): the id leaves its device. */
  _deviceRemoved(): void;
  /** ADDR_CHANGE. */
  _linkAddrChanged(): void;
}

const attached = new Map<Context, Set<DeviceBoundId>>();

registerDeviceClient({
  removed(ctx) {
    const ids = attached.get(ctx);
    attached.delete(ctx);
    // cma_process_remove: each id in turn, in the order they attached.
    for (const id of ids ?? []) id._deviceRemoved();
  },
  linkAddrChanged(ctx) {
    for (const id of [...(attached.get(ctx) ?? [])]) id._linkAddrChanged();
  },
});

/**
 * Attach `id` to the device of `ctx` (`_cma_attach_to_dev`). Returns the detach, which is
 * idempotent.
 */
export function attachId(ctx: Context, id: DeviceBoundId): () => void {
  let set = attached.get(ctx);
  if (set === undefined) {
    set = new Set();
    attached.set(ctx, set);
  }
  set.add(id);
  const release = ctx._holdPortWatch();
  let done = false;
  return () => {
    if (done) return;
    done = true;
    release();
    const s = attached.get(ctx);
    if (s === undefined) return;
    s.delete(id);
    if (s.size === 0) attached.delete(ctx);
  };
}
