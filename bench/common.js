// What the benchmarks share.
//
// CPU pinning: the two processes of a pair on one CPU each, as perftest users pin, so that the
// scheduler's placement does not move the figures (on this 2-core machine it moved single latency
// runs by +-15 %). BENCH_PIN=0, a single CPU or no taskset(1): no pinning.
import { execFileSync } from 'node:child_process';
import os from 'node:os';

function taskset(args) {
  return execFileSync('taskset', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
}

/** The first two CPUs this process may run on (taskset -cp's list, e.g. `0-3,6`), or null. */
export function pinCpus() {
  if (process.env.BENCH_PIN === '0' || os.availableParallelism() < 2) return null;
  try {
    const list = taskset(['-cp', String(process.pid)]).split(':').pop().trim();
    const cpus = list.split(',').flatMap((r) => {
      const [a, b = a] = r.split('-').map(Number);
      return Array.from({ length: b - a + 1 }, (_, i) => a + i);
    });
    return cpus.length >= 2 && cpus.every(Number.isInteger) ? cpus.slice(0, 2) : null;
  } catch {
    return null; // no taskset
  }
}

/** [cmd, args] that run `cmd args` on `cpu` (taskset execs it: the pid, exit and signals are its). */
export function pinned(cpu, cmd, args) {
  return cpu === null || cpu === undefined ? [cmd, args] : ['taskset', ['-c', String(cpu), cmd, ...args]];
}

/** Move this process, all its threads, to `cpu`. */
export function pinSelf(cpu) {
  if (cpu !== null && cpu !== undefined) taskset(['-a', '-cp', String(cpu), String(process.pid)]);
}

/** The median of some runs. */
export function median(a) {
  const s = [...a].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}
