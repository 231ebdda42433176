/**
 * rsocket states (rsocket.c `enum rs_state`): a bitmask ordered passive < connecting <
 * connected < disconnected, where "connected" carries the readable/writable halves.
 *
 * ```
 *  init ─bind→ bound ─listen→ listening
 *    └──────connect→ resolving_addr → resolving_route → connecting ─┐
 *  (listener) accept → accepting ──────────────────────────────────┴→ connected|readable|writable
 *  connected: SHUT_WR / peer SHUTDOWN clear writable / readable;
 *             DISCONNECT (sent and completed, or received) → disconnected;
 *             a failed send / protocol violation → error
 * ```
 * A connection's or a listener's state is a `StateCell` (util/state.ts) showing its states with
 * {@link describeState}: every change is traced under `RDMA_TRACE=rs` as `from -> to (why)`.
 */
import { onTraceChange, tracing } from '../trace.js';

/** An rsocket's state bits (rsocket.c `rs_state`): a connection is in one or several at once. */
export const RsState = {
  init: 0,
  bound: 0x0001,
  listening: 0x0002,
  opening: 0x0004,
  resolvingAddr: 0x0004 | 0x0010,
  resolvingRoute: 0x0004 | 0x0020,
  connecting: 0x0004 | 0x0040,
  accepting: 0x0004 | 0x0080,
  connected: 0x0100,
  writable: 0x0200,
  readable: 0x0400,
  connectRdwr: 0x0100 | 0x0400 | 0x0200,
  connectError: 0x0800,
  disconnected: 0x1000,
  error: 0x2000,
} as const;

/** Trace text of a state value: `connected|readable|writable`, `disconnected`. */
export function describeState(s: number): string {
  if (s === 0) return 'init';
  const parts: string[] = [];
  if (s & RsState.opening) {
    if ((s & 0xf0) === 0x10) parts.push('resolving_addr');
    else if ((s & 0xf0) === 0x20) parts.push('resolving_route');
    else if ((s & 0xf0) === 0x40) parts.push('connecting');
    else if ((s & 0xf0) === 0x80) parts.push('accepting');
    else parts.push('opening');
  }
  if (s & RsState.bound) parts.push('bound');
  if (s & RsState.listening) parts.push('listening');
  if (s & RsState.connected) parts.push('connected');
  if (s & RsState.readable) parts.push('readable');
  if (s & RsState.writable) parts.push('writable');
  if (s & RsState.connectError) parts.push('connect_error');
  if (s & RsState.disconnected) parts.push('disconnected');
  if (s & RsState.error) parts.push('error');
  return parts.join('|');
}

/**
 * Whether rsocket messages are traced (the `rdmacm:rs` channel has subscribers: `RDMA_TRACE=rs`,
 * `setTrace`, a tool): a live binding, kept current as subscribers come and go.
 */
export let RS_TRACE = tracing('rs');
onTraceChange(() => {
  RS_TRACE = tracing('rs');
});
