/**
 * Tracing by named subsystem, silent by default. `RDMA_TRACE=cm,qp,mpa,rx,tx` (or `all`, with
 * `-name` to exclude) writes object-prefixed lines to stderr. See docs/tracing.md.
 */
const spec = (process.env['RDMA_TRACE'] ?? '').split(',').map((s) => s.trim()).filter(Boolean);
const all = spec.includes('all');
/** Some tracer may be on (the data path asks per message: answer without a set lookup). */
const anyTrace = spec.length > 0;
const enabled = new Set(spec.filter((s) => !s.startsWith('-')));
const disabled = new Set(spec.filter((s) => s.startsWith('-')).map((s) => s.slice(1)));

/** The tracer names this package uses. */
export type TraceName = 'cm' | 'qp' | 'mpa' | 'rx' | 'tx' | 'cq' | 'mr' | 'llp' | 'rs' | 'rping';

/** Whether a tracer is on; check before building an expensive message. */
export function tracing(name: TraceName): boolean {
  return anyTrace && (all || enabled.has(name)) && !disabled.has(name);
}

/** Write one trace line: `[rdma:<name>] <prefix> <msg>`. */
export function trace(name: TraceName, prefix: string, msg: string): void {
  if (tracing(name)) process.stderr.write(`[rdma:${name}] ${prefix} ${msg}\n`);
}
