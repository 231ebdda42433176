// What the bench sections share: pinning, medians, running a server/client pair, finding the C
// tools, waiting for a listener.
//
// CPU pinning: the two processes of a pair on one CPU each, as perftest users pin, so that the
// scheduler's placement does not move the figures (unpinned, on a 2-CPU machine, single latency
// runs move by +-15 %). BENCH_PIN=0, a single CPU or no taskset(1): no pinning.
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
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

export const PIN = pinCpus();

/** [cmd, args] that run `cmd args` on `cpu` (taskset execs it: the pid, exit and signals are its). */
export function pinned(cpu, cmd, args) {
  return cpu === null || cpu === undefined ? [cmd, args] : ['taskset', ['-c', String(cpu), cmd, ...args]];
}

/** Move this process, all its threads, to `cpu`; null: back to the CPUs it started with. */
export function pinSelf(cpu) {
  if (cpu !== null && cpu !== undefined) taskset(['-a', '-cp', String(cpu), String(process.pid)]);
  else if (PIN && START_CPUS) taskset(['-a', '-cp', START_CPUS, String(process.pid)]);
}
const START_CPUS = (() => {
  try {
    return taskset(['-cp', String(process.pid)]).split(':').pop().trim();
  } catch {
    return null;
  }
})();

/** The median of some runs (null for none). */
export function median(a) {
  const v = a.filter((x) => typeof x === 'number' && Number.isFinite(x));
  if (!v.length) return null;
  const s = [...v].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** The full path of `cmd` on PATH, or null. */
export function which(cmd) {
  try {
    return execFileSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

/** A port nothing listens on now (the kernel's pick, released). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

/**
 * Run `cmd args` on CPU PIN[side] (when pinning), collecting its output; killed after `timeoutMs`.
 * Resolves { code, out, err, ms } (ms: wall time from spawn to exit).
 */
export function run(cmd, args, { side = null, timeoutMs = 180_000, env } = {}) {
  let child;
  const p = new Promise((resolve) => {
    const t0 = performance.now();
    child = spawn(...pinned(side === null ? null : (PIN?.[side] ?? null), cmd, args), { stdio: ['ignore', 'pipe', 'pipe'], env: env ? { ...process.env, ...env } : process.env });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(t);
      resolve({ code: code ?? (signal ? 128 : 1), out, err, ms: performance.now() - t0 });
    });
    run.children.add(child);
    child.on('exit', () => run.children.delete(child));
  });
  p.kill = () => child.kill('SIGKILL');
  return p;
}
run.children = new Set();
process.on('exit', () => {
  for (const c of run.children) c.kill('SIGKILL');
});

/**
 * Wait until something listens on TCP `port` of this machine, reading /proc/net/tcp{,6} (a probe
 * connection would be taken as the test's client by a one-shot server).
 */
export async function listening(port, ms = 20_000) {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
      let text = '';
      try {
        text = readFileSync(f, 'utf8');
      } catch {
        continue;
      }
      for (const line of text.split('\n')) {
        const c = line.trim().split(/\s+/);
        if (c[1]?.endsWith(hex) && c[3] === '0A') return;
      }
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`nothing listens on port ${port}`);
}

/**
 * One server + client run of a tool taking rstream's options: the server on PIN[0], the client on
 * PIN[1]. Resolves the client's run (run()'s { code, out, err, ms }) with `server`, the server's,
 * and `cpuUs`, the CPU time both processes used in their whole lives (reapedCpuUs(); null where
 * /proc cannot tell). The server must exit 0 too.
 */
export async function pair(cmd, pre, args, { serverArgs = [], clientArgs = [], timeoutMs = 180_000 } = {}) {
  const port = await freePort();
  const reaped0 = reapedCpuUs();
  const srv = run(cmd, [...pre, '-p', String(port), ...args, ...serverArgs], { side: 0, timeoutMs });
  try {
    await listening(port);
  } catch (e) {
    srv.kill();
    throw new Error(`${[cmd, ...pre, ...args].join(' ')}: ${e.message}\n${(await srv).err}`);
  }
  const cli = await run(cmd, [...pre, '-s', '127.0.0.1', '-p', String(port), ...args, ...clientArgs], { side: 1, timeoutMs });
  if (cli.code !== 0) srv.kill();
  const s = await srv;
  if (cli.code !== 0 || s.code !== 0) throw new Error(`${[cmd, ...pre, ...args].join(' ')}: client exit ${cli.code}, server exit ${s.code}\n${cli.err}${s.err}`);
  const reaped = reapedCpuUs();
  return { ...cli, server: s, cpuUs: reaped === null || reaped0 === null ? null : reaped - reaped0 };
}

/** The last JSON line of some output. */
export function lastJson(text) {
  const lines = text.trim().split('\n').filter((l) => l.startsWith('{'));
  return JSON.parse(lines[lines.length - 1]);
}

/** Every JSON line of some output. */
export function jsonLines(text) {
  return text.trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
}

/** Fixed-point text, '-' for null. */
export const fx = (x, d = 2) => (x === null || x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(d));

/** What the run was measured on (for the JSON file). */
export function machine() {
  const cpus = os.cpus();
  return {
    node: process.version,
    v8: process.versions.v8,
    platform: `${os.platform()} ${os.release()}`,
    cpu: cpus[0]?.model ?? null,
    cpus: os.availableParallelism(),
    loadavg: os.loadavg(),
    pinned: PIN,
  };
}

// -- spread and CPU time per operation ------------------------------------------------------------
//
// Every row that prints a ratio to a baseline also prints the spread of each side's rounds and the
// CPU time per operation of each side (user + system of every process the side runs: load from
// other processes moves CPU time much less than wall time). `compare()` makes the JSON of such a
// row, `fmtCompare()` its text.

/** The spread of some runs: { n, median, min, max, rel } (rel = max / min; null for no runs). */
export function spread(a) {
  const v = (a ?? []).filter((x) => typeof x === 'number' && Number.isFinite(x));
  if (!v.length) return null;
  const min = Math.min(...v);
  const max = Math.max(...v);
  return { n: v.length, median: median(v), min, max, rel: min > 0 ? max / min : null };
}

/** Clock ticks per second of /proc/PID/stat's times (sysconf(_SC_CLK_TCK); 100 on Linux). */
const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** Fields of /proc/PID/stat after the command name (which may hold spaces): [0] is the state. */
function statFields(pid) {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return text.slice(text.lastIndexOf(')') + 2).split(' ');
}

/**
 * CPU time in µs (user + system, every thread) process `pid` has used so far; null when it cannot
 * be read (gone, or no /proc). This process: process.cpuUsage(). Another: the sum of its threads'
 * run time in /proc/PID/task/TID/schedstat (nanoseconds), else utime + stime of /proc/PID/stat
 * (clock ticks, 10 ms).
 */
export function procCpuUs(pid = process.pid) {
  if (pid === process.pid) {
    const c = process.cpuUsage();
    return c.user + c.system;
  }
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    if (Number.isFinite(ns) && ns > 0) return ns / 1000;
  } catch {
    // no schedstat: the tick counts below
  }
  try {
    const f = statFields(pid);
    return ((Number(f[11]) + Number(f[12])) * 1e6) / CLK_TCK; // utime, stime
  } catch {
    return null;
  }
}

/**
 * CPU time in µs used so far by the children this process has waited for (cutime + cstime of
 * /proc/self/stat, clock ticks). The difference across a run of child processes that all exit
 * within it is what they used in their whole lives, start-up included.
 */
export function reapedCpuUs() {
  try {
    const f = statFields('self');
    return ((Number(f[13]) + Number(f[14])) * 1e6) / CLK_TCK;
  } catch {
    return null;
  }
}

/**
 * A CPU meter over processes (pids; this process's own pid counts through process.cpuUsage()):
 * `start()`, then `stop()` resolves the µs all of them used in between (null if one could not be
 * read).
 */
export function cpuMeter(pids) {
  let at = null;
  const now = () => pids.map((p) => procCpuUs(p));
  return {
    start() {
      at = now();
    },
    stop() {
      const end = now();
      if (!at || end.some((x, i) => x === null || at[i] === null)) return null;
      return end.reduce((a, x, i) => a + x - at[i], 0);
    },
  };
}

/** user + system µs of a tool's `--json` row (cpu_user_usec, cpu_sys_usec), or null. */
export function jsonCpuUs(row) {
  return row && typeof row.cpu_user_usec === 'number' ? row.cpu_user_usec + (row.cpu_sys_usec ?? 0) : null;
}

/**
 * A row's comparison with its baseline, from rounds in which both sides ran back to back (index k
 * of every array is round k): each side's spread, the ratio ours / base as the median of the
 * rounds' ratios (with its range), and each side's CPU µs per operation (median, spread) and their
 * ratio. Arrays may hold nulls (a run that did not measure).
 */
export function compare({ ours, base, oursCpu = [], baseCpu = [] }) {
  const ratios = (a, b) => (a ?? []).map((x, k) => (typeof x === 'number' && typeof b?.[k] === 'number' && b[k] !== 0 ? x / b[k] : null));
  const r = spread(ratios(ours, base));
  const cr = spread(ratios(oursCpu, baseCpu));
  return {
    ours: spread(ours),
    base: spread(base),
    ratio: r?.median ?? null,
    ratioRange: r ? [r.min, r.max] : null,
    cpu: { ours: spread(oursCpu), base: spread(baseCpu), ratio: cr?.median ?? null },
    runs: { ours, base, oursCpu, baseCpu },
  };
}

/** `median [min–max]` of a spread, '-' for none. */
export function fmtSpread(s, d = 2) {
  if (!s) return '-';
  return s.n > 1 ? `${fx(s.median, d)} [${fx(s.min, d)}–${fx(s.max, d)}]` : fx(s.median, d);
}

/**
 * The spread and CPU columns of a compared row, for the end of its line:
 * `spread ours 42.9 [40.1–47.3] base 22.7 [22.0–25.0]; CPU us/op ours 35.1 base 20.2 (1.74)`.
 */
export function fmtCompare(c, { d = 2, cpuUnit = 'us/op', cpuD = 1 } = {}) {
  const cpu = c.cpu.ours || c.cpu.base ? `; CPU ${cpuUnit} ours ${fmtSpread(c.cpu.ours, cpuD)} base ${fmtSpread(c.cpu.base, cpuD)} (${fx(c.cpu.ratio)})` : '; CPU -';
  return `rounds ours ${fmtSpread(c.ours, d)} base ${fmtSpread(c.base, d)}${cpu}`;
}

/**
 * The CPU µs both ends of a pair() run spent in their timed part, from the last `--json` row of
 * each (the client's and the server's); null when either printed none.
 */
export function pairTimedCpuUs(r) {
  const rowOf = (text) => {
    try {
      return lastJson(text);
    } catch {
      return null;
    }
  };
  const a = jsonCpuUs(rowOf(r.out));
  const b = jsonCpuUs(rowOf(r.server?.out ?? ''));
  return a === null || b === null ? null : a + b;
}
