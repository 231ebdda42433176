/**
 * `ibv_mr` of a native device, registered over the caller's memory in place: `mr.buf` is a view
 * of that memory and `mr.addr` its virtual address, the address SGEs use. The addon holds a strong
 * reference to the memory until `dereg()`, and the context keeps the `Mr` reachable until then,
 * so memory that is registered is never collected.
 */
import { err } from '../errors.js';
import { Mr } from '../verbs/mr.js';
import { checkAttached, type MrMemory } from '../verbs/pd.js';
import { check, type Handle } from './binding.js';
import type { NativeContext } from './context.js';
import type { NativePd } from './pd.js';

/** A Uint8Array over exactly the bytes of `mem` (no copy). */
export function memView(mem: MrMemory, op: string): Uint8Array {
  if (ArrayBuffer.isView(mem)) {
    checkAttached(mem.buffer, op);
    const b = mem.buffer as ArrayBufferLike & { resizable?: boolean; growable?: boolean };
    if (b.resizable === true || b.growable === true) throw err('EINVAL', op, 'resizable/growable buffers cannot be registered');
    return mem instanceof Uint8Array ? mem : new Uint8Array(mem.buffer, mem.byteOffset, mem.byteLength);
  }
  if (mem instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && mem instanceof SharedArrayBuffer)) {
    checkAttached(mem, op);
    const b = mem as ArrayBufferLike & { resizable?: boolean; growable?: boolean };
    if (b.resizable === true || b.growable === true) throw err('EINVAL', op, 'resizable/growable buffers cannot be registered');
    return new Uint8Array(mem);
  }
  throw err('EINVAL', op, 'memory must be an ArrayBuffer, SharedArrayBuffer or ArrayBuffer view');
}

/** `ibv_mr` of a native device. */
export class NativeMr extends Mr {
  /** @internal */
  readonly _h: Handle;
  /** @internal Its slot in the addon's key table (what a BIND_MW work request names it by). */
  readonly _slot: number;

  /** @internal Use `pd.regMr()`. */
  constructor(pd: NativePd, buf: Uint8Array, addr: number, access: number, lkey: number, rkey: number, h: Handle, slot: number) {
    super(pd, buf, addr, access, lkey);
    (this as { rkey: number }).rkey = rkey;
    (this as { handle: number }).handle = lkey >>> 8;
    this._h = h;
    this._slot = slot;
  }

  /** `ibv_dereg_mr()`. */
  override dereg(): void {
    const op = 'ibv_dereg_mr';
    if (!this.registered) throw err('EINVAL', op, 'MR already deregistered');
    const ctx = this.context as NativeContext;
    check(ctx._b.deregMr(this._h), op);
    ctx._liveMrs.delete(this);
    super.dereg();
  }
}
