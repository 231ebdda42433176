/**
 * Many timeouts of one duration on one timer. Deadlines of one duration expire in the order they
 * were set, so a FIFO and one Node timer for its oldest entry do what a timer per entry would —
 * without a `Timeout` object, an async id and timer-list links per entry, nor a `clearTimeout`
 * when the awaited thing comes in time (as it nearly always does). For per-connection timeouts
 * of a setup exchange: a listener taking a thousand connections at once arms a thousand.
 *
 * An entry that expires is reported one pass of socket reads later (from `setImmediate`): Node
 * runs due timers before it polls sockets, so after the process was busy past a deadline, the
 * message that came in time may still be unread when the timer runs — it must win, as it does in
 * a kernel, which reads a socket when its bytes arrive. A cancelled entry keeps no reference to
 * its target, and cancelled entries are swept out once the queue has doubled since the last sweep:
 * the queue holds about twice the deadlines still armed, not every one set within its duration —
 * a listener taking connections at a steady rate would otherwise hold one entry per connection for
 * up to twice the duration.
 */

/** What a deadline reports its expiry to. */
export interface DeadlineTarget {
  deadlineExpired(d: Deadline): void;
}

/** One armed deadline; {@link cancelDeadline} disarms it. */
export interface Deadline {
  readonly at: number;
  target: DeadlineTarget | null;
}

/** The smallest queue length at which cancelled entries are swept out. */
const SWEEP_MIN = 1024;

/** The entries of one duration, oldest first, with the timer of the oldest. */
class DeadlineQueue {
  private q: Deadline[] = [];
  private head = 0;
  /** The queue's length at which {@link add} sweeps out cancelled entries. */
  private sweepAt = SWEEP_MIN;
  private timer: NodeJS.Timeout | null = null;
  private readonly onTimer = (): void => this.expire();

  constructor(private readonly ms: number) {}

  add(target: DeadlineTarget): Deadline {
    const d: Deadline = { at: performance.now() + this.ms, target };
    if (this.q.length >= this.sweepAt) this.sweep();
    this.q.push(d);
    if (this.timer === null) this.arm(this.ms);
    return d;
  }

  /**
   * Keep only the entries still armed, in order. The timer stays set for the old oldest entry: it
   * runs early, finds nothing due and follows the new oldest (or stops if none is left).
   */
  private sweep(): void {
    const q = this.q;
    let w = 0;
    for (let r = this.head; r < q.length; r++) {
      const d = q[r] as Deadline;
      if (d.target !== null) q[w++] = d;
    }
    q.length = w;
    this.head = 0;
    this.sweepAt = Math.max(SWEEP_MIN, 2 * w);
  }

  private arm(ms: number): void {
    this.timer = setTimeout(this.onTimer, ms);
    this.timer.unref();
  }

  private expire(): void {
    this.timer = null;
    // Node may run a timer up to a millisecond before performance.now() reaches its deadline
    // (its loop clock is in whole milliseconds).
    const now = performance.now() + 1;
    const due: Deadline[] = [];
    const q = this.q;
    let i = this.head;
    for (; i < q.length && (q[i] as Deadline).at <= now; i++) {
      const d = q[i] as Deadline;
      if (d.target !== null) due.push(d);
    }
    if (i === q.length) {
      this.q = [];
      this.head = 0;
      this.sweepAt = SWEEP_MIN;
    } else {
      this.head = i;
      if (i > SWEEP_MIN && i * 2 > q.length) this.sweep();
    }
    // Cancelled entries at the front are dropped at their deadline; the timer follows the oldest.
    if (this.head < this.q.length) this.arm(Math.max(1, Math.ceil((this.q[this.head] as Deadline).at - performance.now())));
    if (due.length > 0) {
      setImmediate(() => {
        for (const d of due) {
          const t = d.target;
          if (t === null) continue; // cancelled meanwhile (the awaited message was read)
          d.target = null;
          t.deadlineExpired(d);
        }
      });
    }
  }
}

const queues = new Map<number, DeadlineQueue>();

/** Report to `target` in `ms` milliseconds (then one pass of socket reads), unless cancelled. */
export function armDeadline(ms: number, target: DeadlineTarget): Deadline {
  let q = queues.get(ms);
  if (q === undefined) queues.set(ms, (q = new DeadlineQueue(ms)));
  return q.add(target);
}

/** Disarm `d` (nothing happens if it expired already). */
export function cancelDeadline(d: Deadline): void {
  d.target = null;
}
