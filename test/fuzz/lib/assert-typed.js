// Invariant checks shared by the targets.
import assert from 'node:assert/strict';
import { TerminateError } from '../../../dist/errors.js';
import { isValidTermCode } from '../../../dist/wire/index.js';

/**
 * Call `fn()`; return `{ value }` or `{ error }` where the error must be one of `allowed` (classes).
 * Anything else thrown is a failure of the decoder under test.
 */
export function outcome(fn, allowed) {
  try {
    return { value: fn() };
  } catch (e) {
    if (allowed.some((C) => e instanceof C)) return { error: e };
    throw new Error(`unexpected ${e && e.name ? e.name : typeof e} (allowed: ${allowed.map((C) => C.name).join(', ')}): ${e && e.stack ? e.stack : e}`);
  }
}

/** A TerminateError a decoder threw must carry a code the RFCs define (it goes on the wire). */
export function assertTermValid(e, where) {
  assert.ok(e instanceof TerminateError, `${where}: not a TerminateError`);
  assert.ok(isValidTermCode(e.layer, e.etype, e.ecode), `${where}: TERMINATE ${e.layer}/${e.etype}/0x${e.ecode.toString(16)} is not an RFC code`);
}

/** The (layer, etype, ecode) of a TerminateError as a string, or null. */
export const termKey = (e) => (e instanceof TerminateError ? `${e.layer}/${e.etype}/${e.ecode}` : null);

/** A view of `bytes` that records in `violations` every indexed read outside [0, length). */
export function guarded(bytes, violations) {
  return new Proxy(bytes, {
    get(target, prop) {
      if (typeof prop === 'string' && /^-?\d+$/.test(prop)) {
        const i = Number(prop);
        if (i < 0 || i >= target.length) violations.push(i);
        return target[i];
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}
