// Running suites again under the soft RoCE device's other UDP I/O path (RDMACM_ROCE_IO: the
// netopt addon's batched sockets, or Node's dgram; see docs/design/roce-io.md). A test run uses
// one path; io-paths-*.test.js hand their suites to `runUnderOtherPath` so `npm test` covers both.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const { roceIoKind } = await import('../../dist/transport/roce/udp-endpoint.js');
const { mmsgAvailable } = await import('../../dist/transport/roce/udp-mmsg.js');

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The path this process does not use. */
export const otherPath = roceIoKind() === 'mmsg' ? 'dgram' : 'mmsg';

/** A skip reason when the other path cannot run here, else false. */
export const otherPathSkip = otherPath === 'mmsg' && !mmsgAvailable() ? 'the netopt addon with batched UDP sockets is not built' : false;

/** Run `node args` in the package root under the other path; fails with the tail of its output. */
function runUnder(args, timeout, env = {}) {
  const e = { ...process.env, RDMACM_ROCE_IO: otherPath, ...env };
  delete e.NODE_TEST_CONTEXT; // a run of its own, not a child of this one's runner
  const r = spawnSync(process.execPath, args, { cwd: ROOT, env: e, encoding: 'utf8', timeout });
  const out = `${r.stdout ?? ''}${r.stderr ?? ''}`;
  assert.equal(r.status, 0, `${r.error ?? ''}\n${out.slice(-4000)}`);
  return out;
}

/**
 * Run the test files `suites` (paths from the package root) under the other path, only the tests
 * whose names match `namePattern` when given: all pass.
 */
export function suitesUnderOtherPath(suites, timeout, namePattern) {
  const pick = namePattern ? [`--test-name-pattern=${namePattern}`] : [];
  const out = runUnder(['--test', '--test-reporter=tap', '--test-concurrency=2', '--test-timeout=100000', ...pick, ...suites], timeout);
  const pass = Number(/# pass (\d+)/.exec(out)?.[1] ?? 0);
  assert.ok(pass >= suites.length, `the suites ran (${pass} passed)`);
  assert.match(out, /# fail 0/);
  assert.match(out, /# cancelled 0/);
}

/** Run the fuzz targets `targets` for `seconds` each under the other path: all pass. */
export function fuzzUnderOtherPath(targets, seconds, timeout) {
  const out = runUnder(['test/fuzz/run.js'], timeout, { FUZZ_TARGETS: targets.join(','), FUZZ_SECONDS: String(seconds) });
  assert.match(out, /all targets passed/);
  for (const t of targets) assert.match(out, new RegExp(`${t}: \\d+ cases`));
}
