/**
 * How a tool's process runs its JavaScript engine, set before anything else of the tool loads:
 * every tool imports this module first (an ES module whose only import of this package,
 * util/env.js, imports nothing, so it is evaluated before the rest of the tool's module graph).
 *
 * A tool run once spends its first second compiling: V8 interprets the data path, then
 * TurboFan compiles the hot functions on background threads (for `rping -C 1000`, about as much
 * CPU as the 1000 pings themselves once compiled). Two settings shorten that (measured in
 * docs/design/performance.md, "Cold start"). Every tool gets:
 *
 * - V8's background threads (TurboFan jobs, concurrent and parallel GC tasks; the platform's
 *   worker threads, which exist before any of our code runs) at `nice 5`, the tool's own thread at
 *   the priority it was started with. At equal priority they take turns with the tool's thread on
 *   its CPU, so each message of a ping-pong waits for compile jobs; at nice 5 the tool's thread
 *   gets about three quarters of a CPU they share, and the jobs run mostly while it waits for its
 *   peer. Not 19: at nice 19 a warm `cmtime` (which allocates much) on a machine loaded by other
 *   processes took 1.45 × as long per connection (with both processes busy, compile and GC jobs
 *   at nice 19 barely get a CPU). libuv's thread pool (file reads, getaddrinfo), which the module
 *   loader has started by then, gets the same value; threads started later are made by the main
 *   thread and keep its priority. Linux only (a thread's id under /proc/self/task is what
 *   setpriority(2) takes); elsewhere, or when not allowed, nothing happens.
 *   `RDMACM_JIT_NICE=<1..19>` chooses another value, `0` leaves them alone.
 *
 * And some that a tool chooses for itself. {@link idleBackgroundThreads}: the background threads
 * under the SCHED_IDLE policy instead, for a tool whose threads mostly wait for a peer (rping):
 * a tool thread that wakes then takes the CPU from a compile job at once, where a nice value only
 * weighs their shares. Not for a tool that keeps both processes busy (cmtime: its warm run took
 * 1.9 × as long, the compile and GC jobs starving), nor for the rsocket tools: rstream's one-shot
 * bandwidth rows gained, but its long bandwidth runs lost a quarter to a third of their rate, and
 * riostream, which polls, took twice as long per 64 B transfer. And {@link setInterruptBudget}: V8's
 * interrupt budget (how much bytecode a function runs before V8 considers optimising it), lowered
 * from 67584 to 16384 by
 * rping, so that its ping path reaches TurboFan after a quarter of the calls. Not for every tool:
 * in `cmtime`, whose 1000 connections at once keep both processes busy, the same budget made the
 * cold run take about 1.9 × as long. rstream and riostream choose two others: {@link eagerFeedback}
 * for their whole run, and a higher interrupt budget for the bandwidth phase of their default series
 * (`bandwidthPhaseBudget` in rstream.ts). And {@link deferOptimization}: rping and cmtime keep
 * TurboFan off for the first part of a run (1000 pings, 1000 connections), which a one-shot run
 * then does without.
 */
import { readdirSync } from 'node:fs';
import os from 'node:os';
import v8 from 'node:v8';
import { envInt } from '../util/env.js';

/** V8's own interrupt budget (its `--interrupt-budget` default in this Node's V8, 11.3). */
export const V8_INTERRUPT_BUDGET = 67584;

/** The nice value V8's background threads get (`RDMACM_JIT_NICE`; 0: left alone). */
const JIT_NICE = envInt('RDMACM_JIT_NICE', 5, 19);

/** Give every thread of this process but the main one the nice value `nice` (if lower now). */
export function lowerBackgroundThreadPriority(nice: number): void {
  if (nice <= 0) return;
  let tids: string[];
  try {
    tids = readdirSync('/proc/self/task');
  } catch {
    return;
  }
  for (const t of tids) {
    const tid = Number(t);
    if (tid === process.pid) continue;
    try {
      if (os.getPriority(tid) < nice) os.setPriority(tid, nice);
    } catch {
      // the thread ended, or another OS's numbering: leave it
    }
  }
}

/**
 * Set V8's interrupt budget to `budget` (bytes of bytecode a function runs between two looks at
 * whether to optimise it) from the next look at each function on, unless the environment variable
 * `env` (`RDMACM_JIT_BUDGET` unless told) chooses another (`0`: leave the budget as it is).
 */
export function setInterruptBudget(budget: number, env = 'RDMACM_JIT_BUDGET'): void {
  const n = envInt(env, budget, 1 << 24);
  if (n > 0) v8.setFlagsFromString(`--interrupt-budget=${n}`);
}

/**
 * Give every function a feedback vector from its first call (V8's `--no-lazy-feedback-allocation`)
 * instead of after it has run about a kilobyte of bytecode; `RDMACM_JIT_EAGER_FEEDBACK=0` leaves
 * V8's default. Call before the tool's own functions first run. With lazy allocation, what a
 * function does in its first few calls is not recorded: a branch that a benchmark's 16-byte sync
 * exchange takes once, before the bulk transfers, is then unknown to the code TurboFan compiles
 * during them, and the next sync (before the timed part) throws that code away on both sides.
 * Measured in docs/design/performance.md ("Cold start"): kept for rstream and riostream.
 */
export function eagerFeedback(): void {
  if (envInt('RDMACM_JIT_EAGER_FEEDBACK', 1, 1) > 0) v8.setFlagsFromString('--no-lazy-feedback-allocation');
}

/**
 * Below this many CPUs (`os.availableParallelism()`: those this process may run on) a tool holds
 * TurboFan back by default ({@link deferOptimization}); measured on 2.
 */
export const FEW_CPUS = 4;

/**
 * Keep TurboFan off for the first `units` units of a tool's work (pings, connections), then turn
 * it on: returns the function the tool calls with the units it has done (one unless told), whose
 * call that brings the count to `units` does it. By default only with fewer than {@link FEW_CPUS}
 * CPUs; `RDMACM_JIT_DEFER=<n>` chooses the count whatever the CPUs, `0` leaves TurboFan on from
 * the start.
 *
 * On a machine with few CPUs, TurboFan's jobs in a fresh process cost more than they save for a
 * short run: both processes of a two-process test compile about 80 functions each (some 250 ms of
 * CPU per process), and until those jobs are done the pings wait for the CPU, not for JavaScript.
 * A one-shot `rping -C 1000` took half the time with no TurboFan at all (Sparkplug code only).
 * Held back until the run has lasted long enough that its rest pays for the jobs, the short run
 * does without them and a long one gets them after a fixed delay; a run a few times longer than
 * the delay pays for it once (the figures are in docs/design/performance.md, "Cold start"). V8 compiles with
 * TurboFan again from the next look at each hot function on (its interrupt budget). With CPUs to
 * spare the jobs run beside the tool's threads, and V8's own choice stands.
 */
export function deferOptimization(units: number): (done?: number) => void {
  const n = envInt('RDMACM_JIT_DEFER', os.availableParallelism() < FEW_CPUS ? units : 0, 1 << 30);
  if (n <= 0) return noOp;
  v8.setFlagsFromString('--no-turbofan');
  let left = n;
  return (done = 1) => {
    if (left <= 0) return;
    left -= done;
    if (left <= 0) v8.setFlagsFromString('--turbofan');
  };
}

function noOp(): void {}

/**
 * Put every thread of this process but the main one under the SCHED_IDLE scheduling policy
 * (Linux: `chrt -i -p 0 <tid>` per thread, run in a child process this call does not wait for;
 * without `chrt`, or elsewhere, nothing happens and the nice value above stays). A thread that
 * wakes then preempts a running SCHED_IDLE thread of its CPU at once. `RDMACM_JIT_IDLE=0` turns it
 * off. Threads the process starts later (made by the main thread) keep the main thread's policy.
 */
export async function idleBackgroundThreads(): Promise<void> {
  if (process.platform !== 'linux' || envInt('RDMACM_JIT_IDLE', 1, 1) === 0) return;
  let tids: string[];
  try {
    tids = readdirSync('/proc/self/task').filter((t) => Number(t) !== process.pid);
  } catch {
    return;
  }
  if (tids.length === 0) return;
  const { spawn } = await import('node:child_process');
  try {
    const c = spawn('sh', ['-c', 'for t; do chrt -i -p 0 "$t"; done', 'sh', ...tids], { stdio: 'ignore' });
    c.on('error', () => {});
    c.unref();
  } catch {
    // no shell: leave the threads as they are
  }
}

lowerBackgroundThreadPriority(JIT_NICE);
