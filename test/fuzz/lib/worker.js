// Worker side of runInWorker(): load one target file, run its cases, post the result. The shared
// array tells the watchdog which case is running and that cases keep starting.
import { parentPort, workerData } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
import { FuzzFailure, runCases } from './runner.js';

const { file, opts, shared } = workerData;
const target = (await import(pathToFileURL(file).href)).default;
const progress = (i) => {
  Atomics.store(shared, 0, i);
  Atomics.add(shared, 1, 1);
};
try {
  const stats = await runCases(target, { ...opts, progress });
  parentPort.postMessage({ ok: true, stats });
} catch (e) {
  const message = e instanceof FuzzFailure ? e.message : `fuzz target ${target.name}: ${e && e.stack ? e.stack : e}`;
  parentPort.postMessage({ ok: false, caseIndex: e instanceof FuzzFailure ? e.caseIndex : null, message });
}
