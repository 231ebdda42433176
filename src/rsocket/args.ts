/**
 * The argument checks of the Node face (RSocket, RServer, RDgramSocket), made where `net` and
 * `dgram` make theirs — synchronously, in the call, before anything is bound, resolved or sent —
 * with the rules they apply, but failing with an {@link RdmaError} EINVAL that names the call
 * (`rconnect`, `rbind`, `rsendto` …) and says which argument was wrong and what it held.
 *
 * Ports follow Node's `validatePort`: a number or a numeric string, an integer from 0 to 65535
 * (1 to 65535 where 0 means nothing, as a datagram's destination).
 */
import { RdmaError } from '../errors.js';

/** Largest port number. */
const PORT_MAX = 0xffff;

/** How a value shows in a message: `70000`, `'abc'`, `undefined`, `an object`. */
export function describeValue(v: unknown): string {
  if (typeof v === 'string') return `'${v}'`;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint' || v === undefined || v === null) return String(v);
  if (typeof v === 'function') return 'a function';
  return `an ${typeof v}`;
}

/** EINVAL for `op`, saying `what` was wrong. */
export function badArg(op: string, what: string): RdmaError {
  return new RdmaError('EINVAL', { op, detail: what });
}

/**
 * A port as Node's `validatePort` takes it (a number or a numeric string, an integer, from 0 or
 * 1 up to 65535), as a number; else EINVAL naming `name` and the value.
 */
export function checkPort(v: unknown, op: string, name = 'port', allowZero = true): number {
  const min = allowZero ? 0 : 1;
  const ok =
    (typeof v === 'number' || (typeof v === 'string' && v.trim().length > 0)) &&
    +v === +v >>> 0 &&
    +v <= PORT_MAX &&
    +v >= min;
  if (!ok) throw badArg(op, `${name} should be >= ${min} and <= ${PORT_MAX}, got ${describeValue(v)}`);
  return +(v as number | string);
}

/** An optional string argument (a host name or address): undefined or a string, else EINVAL. */
export function checkHost(v: unknown, op: string, name = 'host'): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw badArg(op, `${name} should be a string, got ${describeValue(v)}`);
  return v;
}

/** An optional address family as `net.connect`'s `family`: 0, 4 or 6. */
export function checkFamily(v: unknown, op: string): 0 | 4 | 6 | undefined {
  if (v === undefined) return undefined;
  if (v !== 0 && v !== 4 && v !== 6) throw badArg(op, `family should be 0, 4 or 6, got ${describeValue(v)}`);
  return v;
}

/** An optional `signal`: undefined or an AbortSignal, else EINVAL. */
export function checkSignal(v: unknown, op: string): AbortSignal | undefined {
  if (v === undefined) return undefined;
  if (!(v instanceof AbortSignal)) throw badArg(op, `signal should be an AbortSignal, got ${describeValue(v)}`);
  return v;
}

/** An optional listen backlog: a non-negative integer (Node takes any number; rlisten an int). */
export function checkBacklog(v: unknown, op: string): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0x7fffffff) throw badArg(op, `backlog should be an integer >= 0, got ${describeValue(v)}`);
  return v;
}

/**
 * The port of a socket address handed to an rsocket call (rbind, rconnect, rsendto): what a
 * `sockaddr_in`'s 16-bit `sin_port` can hold, an integer from 0 to 65535; else EINVAL of `op`
 * (a C caller cannot pass more; a larger number would otherwise wrap on some path).
 */
export function checkAddrPort(addr: { port: number }, op: string): void {
  const p = addr.port;
  if (!Number.isInteger(p) || p < 0 || p > PORT_MAX) throw badArg(op, `port should be >= 0 and <= ${PORT_MAX}, got ${describeValue(p)}`);
}
