/**
 * Typed events for the Node face, as `@types/node` types `net.Server`, `net.Socket` and
 * `dgram.Socket`: an event map (`{ connection: [socket: RSocket]; error: [err: Error] … }`) gives
 * the listener of each named event its arguments; any other event name keeps EventEmitter's
 * untyped listener. A class declares an interface of the same name beside itself (declaration
 * merging) whose `on`/`once`/`off`/`addListener`/`removeListener`/`prependListener`/
 * `prependOnceListener`/`emit` take these types, and keeps its EventEmitter or Duplex base.
 */

/** A listener for event `K` of map `M` (untyped for names outside the map). */
export type EventListener<M, K> = K extends keyof M ? (M[K] extends unknown[] ? (...args: M[K]) => void : never) : (...args: any[]) => void;

/** The arguments of event `K` of map `M` (any for names outside the map). */
export type EventArgs<M, K> = K extends keyof M ? (M[K] extends unknown[] ? M[K] : never) : any[];
