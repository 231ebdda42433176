// The fuzz runner: loads the targets (one file each in test/fuzz/targets/), runs a target's cases
// for a number of cases or a time budget, each case with its own generator derived from the run
// seed and the case index, and reports the first failure with what is needed to replay it.
//
// runInWorker() runs a target in a worker thread with a watchdog (a case that stops making
// progress is a hang) and a heap limit (a decoder that allocates without bound dies there), so
// "never loops, bounded memory" is checked as well as the target's own invariants.
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { Rng, caseSeed } from './rng.js';

const HERE = dirname(fileURLToPath(import.meta.url));
export const TARGETS_DIR = join(HERE, '..', 'targets');

/** Heap limit of a target's worker: far above what any decoder needs for its bounded inputs. */
const WORKER_HEAP_MB = 512;

/** Every target file (sorted), optionally only those whose name is in `names`. */
export async function loadTargets(names = null) {
  const files = readdirSync(TARGETS_DIR).filter((f) => f.endsWith('.js')).sort();
  const out = [];
  for (const f of files) {
    const file = join(TARGETS_DIR, f);
    const target = (await import(pathToFileURL(file).href)).default;
    validateTarget(target, f);
    if (names === null || names.includes(target.name)) out.push({ file, target });
  }
  if (names !== null) {
    const missing = names.filter((n) => !out.some((t) => t.target.name === n));
    if (missing.length > 0) throw new Error(`no fuzz target named ${missing.join(', ')}`);
  }
  return out;
}

function validateTarget(t, file) {
  if (t === null || typeof t !== 'object') throw new Error(`${file}: no default export`);
  if (typeof t.name !== 'string' || !/^[a-z0-9-]+$/.test(t.name)) throw new Error(`${file}: name must be kebab-case`);
  if (typeof t.run !== 'function') throw new Error(`${file}: run(rng, t, ctx) missing`);
}

/** A failed case: the error and what is needed to replay it. */
export class FuzzFailure extends Error {
  constructor(target, seed, index, cause, notes) {
    const replay = `FUZZ_SEED=${seed} FUZZ_CASE=${index} FUZZ_TARGETS=${target} npm run fuzz`;
    const why = cause instanceof Error ? (cause.stack ?? String(cause)) : String(cause);
    super(`fuzz target ${target}: case ${index} of seed ${seed} failed\n${why}${notes.length ? `\ncase: ${notes.join('\n      ')}` : ''}\nreplay: ${replay}`);
    this.name = 'FuzzFailure';
    this.target = target;
    this.seed = seed;
    this.caseIndex = index;
    this.replay = replay;
  }
}

/**
 * Run `target` in this thread. Stops after `cases` cases or `ms` milliseconds, whichever first
 * (at least one case); `caseIndex` runs that single case only. `progress(i)` is called before each
 * case. Returns `{ cases, ms, counts }`; throws a {@link FuzzFailure}.
 */
export async function runCases(target, { seed, cases = Infinity, ms = Infinity, caseIndex = null, progress = null }) {
  const counts = Object.create(null);
  let notes = [];
  const t = {
    /** Record a fact about the current case, printed if it fails. */
    note(s) {
      notes.push(s);
    },
    /** Count an outcome (reported after the run; `check` may require some). */
    count(key, n = 1) {
      counts[key] = (counts[key] ?? 0) + n;
    },
  };
  const ctx = target.setup ? await target.setup() : undefined;
  const t0 = performance.now();
  const first = caseIndex ?? 0;
  const last = caseIndex ?? Infinity;
  let i = first;
  let done = 0;
  try {
    for (; i <= last; i++) {
      if (done > 0 && (done >= cases || performance.now() - t0 >= ms)) break;
      if (progress !== null) progress(i);
      notes = [];
      const rng = new Rng(caseSeed(seed, i));
      try {
        const r = target.run(rng, t, ctx);
        if (r !== undefined && typeof r.then === 'function') await r;
      } catch (e) {
        throw new FuzzFailure(target.name, seed, i, e, notes);
      }
      done++;
    }
  } finally {
    if (target.teardown) await target.teardown(ctx);
  }
  const stats = { cases: done, ms: Math.round(performance.now() - t0), counts };
  if (caseIndex === null && target.check) {
    try {
      target.check(counts, done);
    } catch (e) {
      throw new FuzzFailure(target.name, seed, `coverage after ${done} cases`, e, []);
    }
  }
  return stats;
}

/**
 * Run a target file in a worker thread: the same as {@link runCases}, plus a watchdog (no new
 * case within the target's `caseTimeoutMs`, default 5 s: a hang, the worker is terminated) and a
 * heap limit. Resolves `{ ok: true, stats }` or `{ ok: false, message, seed, caseIndex }`.
 */
export function runInWorker(file, target, opts) {
  const shared = new Int32Array(new SharedArrayBuffer(8)); // [case index, cases started]
  const hangMs = target.caseTimeoutMs ?? 5000;
  const worker = new Worker(new URL('./worker.js', import.meta.url), {
    workerData: { file, opts, shared },
    resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
    stdout: false,
    stderr: false,
  });
  return new Promise((resolve) => {
    let settled = false;
    let lastStarted = -1;
    let lastChange = performance.now();
    const finish = (r) => {
      if (settled) return;
      settled = true;
      clearInterval(watch);
      resolve(r);
    };
    const failAtCurrent = (what) => {
      const i = Atomics.load(shared, 0);
      const replay = `FUZZ_SEED=${opts.seed} FUZZ_CASE=${i} FUZZ_TARGETS=${target.name} npm run fuzz`;
      finish({ ok: false, seed: opts.seed, caseIndex: i, message: `fuzz target ${target.name}: case ${i} of seed ${opts.seed}: ${what}\nreplay: ${replay}` });
    };
    const watch = setInterval(() => {
      const started = Atomics.load(shared, 1);
      if (started !== lastStarted) {
        lastStarted = started;
        lastChange = performance.now();
      } else if (performance.now() - lastChange > hangMs) {
        failAtCurrent(`no progress for ${hangMs} ms (a hang or an endless loop)`);
        void worker.terminate();
      }
    }, Math.min(250, hangMs / 4));
    worker.on('message', (m) => {
      void worker.terminate(); // a target may leave handles behind; the result is in
      if (m.ok) finish({ ok: true, stats: m.stats });
      else finish({ ok: false, seed: opts.seed, caseIndex: m.caseIndex, message: m.message });
    });
    worker.on('error', (e) => failAtCurrent(`the worker died: ${e && e.code ? `${e.code} ` : ''}${e && e.stack ? e.stack : e}`));
    worker.on('exit', (code) => failAtCurrent(`the worker exited (${code}) without a result`));
  });
}
