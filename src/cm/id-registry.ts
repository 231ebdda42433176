/**
 * The process's live CM ids, numbered as the kernel numbers them for `rdma resource show
 * cm_id` (`cm-idn`, from 0 in creation order), for the resource listing (src/stat/). Held weakly:
 * an id the application dropped without rdma_destroy_id leaves the list when it is collected.
 */
import type { CmId } from './cm-id.js';

const live = new Map<number, WeakRef<CmId>>();
const gone = new FinalizationRegistry<number>((n) => live.delete(n));
let next = 0;

/** @internal Number `id` and list it (the id's constructor). */
export function registerId(id: CmId): number {
  const n = next++;
  live.set(n, new WeakRef(id));
  gone.register(id, n, id);
  return n;
}

/** @internal `id` was destroyed. */
export function unregisterId(id: CmId): void {
  live.delete(id.idn);
  gone.unregister(id);
}

/** The live ids, by number. */
export function liveCmIds(): CmId[] {
  const out: CmId[] = [];
  for (const r of live.values()) {
    const id = r.deref();
    if (id !== undefined) out.push(id);
  }
  return out;
}
