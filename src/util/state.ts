/**
 * The one form of every state machine in the package: a cell holding the state, changed only by
 * {@link StateCell.move} (unconditional) or {@link StateCell.exch} (only from the states given —
 * the kernel's `cma_comp_exch`), every change traced as `from -> to (why)` under the owner's
 * tracer. Checks read {@link StateCell.is} / {@link StateCell.in}; nothing assigns the state.
 */
import { traceEvent, tracing, type TraceName } from '../trace.js';

export class StateCell<S> {
  private current: S;

  /**
   * @param tracer the `RDMA_TRACE` name the changes are traced under
   * @param tag the owner's trace prefix (a function: an owner's tag may change, as a CM id's does)
   * @param initial the state it starts in (not traced)
   * @param show how a state is written in a trace line
   */
  constructor(
    private readonly tracer: TraceName,
    private readonly tag: () => string,
    initial: S,
    private readonly show: (s: S) => string = String,
  ) {
    this.current = initial;
  }

  get state(): S {
    return this.current;
  }

  is(s: S): boolean {
    return this.current === s;
  }

  in(states: readonly S[]): boolean {
    return states.includes(this.current);
  }

  /**
   * Go to `to`, whatever the state is; returns the state it left. A "move" to the state it is in
   * already is none and leaves no trace line.
   */
  move(to: S, why: string): S {
    const from = this.current;
    if (from === to) return from;
    this.current = to;
    if (tracing(this.tracer)) traceEvent(this.tracer, this.tag(), 'state', { from: this.show(from), to: this.show(to), why });
    return from;
  }

  /**
   * Go to `to` only from one of `from` (one state or several); whether it did. The guard and the
   * change are one step, so two paths racing for the same change cannot both take it.
   */
  exch(from: S | readonly S[], to: S, why: string): boolean {
    const ok = Array.isArray(from) ? (from as readonly S[]).includes(this.current) : this.current === from;
    if (ok) this.move(to, why);
    return ok;
  }
}
