/**
 * Tracing by named subsystem, silent by default, through `node:diagnostics_channel`: one channel
 * per subsystem (`rdmacm:cm`, `rdmacm:qp` …) carrying {@link TraceMessage}s. A subsystem is on
 * while its channel has subscribers — a tool's (OpenTelemetry, a test) or the package's own stderr
 * printer, which `RDMA_TRACE=cm,qp,-rx` / `NODE_DEBUG=rdmacm` or {@link setTrace} attach. See
 * docs/tracing.md.
 *
 * A trace point costs one boolean read while nothing listens: `if (tracing('tx')) traceEvent(…)`.
 * Node gives no notice of a subscription, so each channel's `subscribe`/`unsubscribe` (and the
 * store bindings, which activate a channel as well) are wrapped to refresh the flags.
 */
import dc from 'node:diagnostics_channel';
import { debuglog } from 'node:util';
import { TRACE_TEXT, type TraceEvent, type TraceEventFields } from './trace-events.js';

export type { TraceEvent, TraceEventFields } from './trace-events.js';

/** The subsystems (tracer names), each with its channel `rdmacm:<name>`. */
export const TRACE_NAMES = Object.freeze(['cm', 'qp', 'mpa', 'rx', 'tx', 'cq', 'mr', 'llp', 'roce', 'rs'] as const);

/** A subsystem (tracer) name. */
export type TraceName = (typeof TRACE_NAMES)[number];

/** The diagnostics channel name of each subsystem: `rdmacm:cm` … */
export const TRACE_CHANNELS: { readonly [N in TraceName]: string } = Object.freeze(
  Object.fromEntries(TRACE_NAMES.map((n) => [n, `rdmacm:${n}`])) as { [N in TraceName]: string },
);

const OBJECT_RE = /^([^[\]:]+)(?:\[(.*)\]|:(.+))$/;

/**
 * One trace message, as published on the channel of its subsystem. Its `text` (the part of a trace
 * line after the object) is derived from `event` and `fields`; `String(msg)` is `object text`.
 */
export class TraceMessage<E extends TraceEvent = TraceEvent> {
  constructor(
    /** The subsystem: the channel is `rdmacm:<subsystem>`. */
    readonly subsystem: TraceName,
    /** The object as trace lines show it: `QP[12]`, `ID[3]`, `CEP[1]`, `RS[2]`, `MR[0x00abcd00]`, `roce:4791`, a device name. */
    readonly object: string,
    /** What happened (docs/tracing.md lists the events of each subsystem and their fields). */
    readonly event: E,
    /** The event's fields. */
    readonly fields: Readonly<TraceEventFields[E]>,
  ) {}

  /** The kind of object: `QP` of `QP[12]`, `roce` of `roce:4791`; the whole object otherwise (a device name). */
  get objectType(): string {
    return OBJECT_RE.exec(this.object)?.[1] ?? this.object;
  }

  /** The object's identity within its kind: 12 of `QP[12]` (a number when decimal), `0x00abcd00` of `MR[0x00abcd00]`; undefined for a bare name. */
  get objectId(): number | string | undefined {
    const m = OBJECT_RE.exec(this.object);
    const id = m?.[2] ?? m?.[3];
    if (id === undefined) return undefined;
    return /^\d+$/.test(id) ? Number(id) : id;
  }

  /** The trace line's text after the object: `RTS -> ERR (peer closed)`. */
  get text(): string {
    return (TRACE_TEXT[this.event] as unknown as (f: unknown) => string)(this.fields);
  }

  /** The object and the text, as a trace line shows them after its `[rdma:<subsystem>]` prefix: `QP[12] RTS -> ERR (peer closed)`. */
  toString(): string {
    return `${this.object} ${this.text}`;
  }

  /** Every field, the derived ones included (`objectType`, `objectId`, `text`): what `JSON.stringify` writes. */
  toJSON(): { subsystem: TraceName; event: E; object: string; objectType: string; objectId: number | string | undefined; fields: Readonly<TraceEventFields[E]>; text: string } {
    return { subsystem: this.subsystem, event: this.event, object: this.object, objectType: this.objectType, objectId: this.objectId, fields: this.fields, text: this.text };
  }
}

/** A message of any event, discriminated by `event`: `if (m.event === 'state') m.fields.to`. */
export type AnyTraceMessage = { [E in TraceEvent]: TraceMessage<E> }[TraceEvent];

// -- the channels and the on/off flags ------------------------------------------------------------

const channels = {} as { [N in TraceName]: dc.Channel };
/** Per subsystem: its channel has subscribers. */
const on: { [N in TraceName]: boolean } = { cm: false, qp: false, mpa: false, rx: false, tx: false, cq: false, mr: false, llp: false, roce: false, rs: false };
/** Some channel has subscribers (the first read of every guard). */
let anyOn = false;
const changeListeners: Array<() => void> = [];

function refresh(): void {
  let any = false;
  for (const n of TRACE_NAMES) {
    const has = channels[n].hasSubscribers;
    on[n] = has;
    any ||= has;
  }
  anyOn = any;
  for (const l of changeListeners) l();
}

/**
 * Wrap the methods that change whether a channel is active so that the flags follow. The wrapper
 * uncovers the channel's own method while it runs (Node's inactive channel re-dispatches through
 * `this` once it has made itself active).
 */
function watch(ch: dc.Channel): void {
  for (const m of ['subscribe', 'unsubscribe', 'bindStore', 'unbindStore'] as const) {
    const target = ch as unknown as Record<string, unknown>;
    const wrapper = (...args: unknown[]): unknown => {
      delete target[m];
      try {
        return (target[m] as (...a: unknown[]) => unknown).apply(ch, args);
      } finally {
        Object.defineProperty(ch, m, { value: wrapper, configurable: true, writable: true, enumerable: false });
        refresh();
      }
    };
    Object.defineProperty(ch, m, { value: wrapper, configurable: true, writable: true, enumerable: false });
  }
}

for (const n of TRACE_NAMES) {
  channels[n] = dc.channel(TRACE_CHANNELS[n]);
  watch(channels[n]);
}
// A tool may have subscribed before the package loaded (instrumentation run with --import).
refresh();

/**
 * Whether subsystem `name` is traced (its channel has subscribers); check before building a message.
 * While nothing subscribes this is one read of a boolean (small enough to be inlined at every guard).
 */
export function tracing(name: TraceName): boolean {
  return anyOn && isOn(name);
}

/**
 * A switch over the names rather than `on[name]`: with some other subsystem on, a keyed read from
 * the call sites' many names is several times slower than these constant ones.
 */
function isOn(name: TraceName): boolean {
  switch (name) {
    case 'tx':
      return on.tx;
    case 'rx':
      return on.rx;
    case 'qp':
      return on.qp;
    case 'cm':
      return on.cm;
    case 'rs':
      return on.rs;
    case 'mpa':
      return on.mpa;
    case 'llp':
      return on.llp;
    case 'roce':
      return on.roce;
    case 'cq':
      return on.cq;
    case 'mr':
      return on.mr;
  }
}

/** Publish one structured message on `name`'s channel (nothing when nobody subscribes). */
export function traceEvent<E extends TraceEvent>(name: TraceName, object: string, event: E, fields: TraceEventFields[E]): void {
  if (tracing(name)) channels[name].publish(new TraceMessage(name, object, event, fields));
}

/** Publish one line of free text (a `note` event): `<object> <msg>`. */
export function trace(name: TraceName, prefix: string, msg: string): void {
  if (tracing(name)) channels[name].publish(new TraceMessage(name, prefix, 'note', { text: msg }));
}

/** @internal Call `fn` whenever some subsystem goes on or off (a module caching a guard in a live binding). */
export function onTraceChange(fn: () => void): void {
  changeListeners.push(fn);
}

// -- the stderr printer: RDMA_TRACE, NODE_DEBUG=rdmacm, setTrace ---------------------------------

const nodeDebug = debuglog('rdmacm');
/** `NODE_DEBUG=rdmacm`: lines go out in util.debuglog's form, `RDMACM <pid>: <subsystem> <object> <text>`. */
const debugForm = nodeDebug.enabled;

function print(m: unknown): void {
  if (!(m instanceof TraceMessage)) return;
  if (debugForm) nodeDebug('%s %s %s', m.subsystem, m.object, m.text);
  else process.stderr.write(`[rdma:${m.subsystem}] ${m.object} ${m.text}\n`);
}

const printed = new Set<TraceName>();

/** Names of a `RDMA_TRACE`-style list (`all`, `cm,qp`, `all,-rx`); unknown names are ignored. */
function parseSpec(spec: string): Set<TraceName> {
  const items = spec.split(',').map((s) => s.trim()).filter(Boolean);
  const plus = new Set(items.filter((s) => !s.startsWith('-')));
  const minus = new Set(items.filter((s) => s.startsWith('-')).map((s) => s.slice(1)));
  return new Set(TRACE_NAMES.filter((n) => (plus.has('all') || plus.has(n)) && !minus.has(n)));
}

/** Print subsystems `names` to stderr as well (their channels gain the package's printer). */
export function enableTrace(...names: TraceName[]): void {
  for (const n of names) {
    if (!TRACE_NAMES.includes(n) || printed.has(n)) continue;
    printed.add(n);
    channels[n].subscribe(print);
  }
}

/** Stop printing subsystems `names` (other subscribers of their channels keep receiving). */
export function disableTrace(...names: TraceName[]): void {
  for (const n of names) {
    if (!printed.delete(n)) continue;
    channels[n].unsubscribe(print);
  }
}

/**
 * Print exactly the subsystems of `spec`, in `RDMA_TRACE`'s syntax (`'cm,qp'`, `'all,-rx'`; `''`
 * prints none) — the run-time equivalent of starting with `RDMA_TRACE=spec`.
 */
export function setTrace(spec: string): void {
  const want = parseSpec(spec);
  disableTrace(...[...printed].filter((n) => !want.has(n)));
  enableTrace(...want);
}

/** The subsystems printed to stderr now. */
export function printedTraces(): TraceName[] {
  return TRACE_NAMES.filter((n) => printed.has(n));
}

// `RDMA_TRACE` chooses the subsystems; `NODE_DEBUG=rdmacm` alone prints them all.
const envSpec = process.env['RDMA_TRACE'] ?? '';
setTrace(envSpec !== '' ? envSpec : debugForm ? 'all' : '');
