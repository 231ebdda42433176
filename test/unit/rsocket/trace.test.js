// RDMA_TRACE=rs: the listener's state changes are traced as the connection's are, through the
// project's one tracer (so `all` and `-rs` select them as they select every other tracer).
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

const T = { timeout: 60_000 };
const PAIR = new URL('../../lib/rs-pair.js', import.meta.url).href;

/** Run one connected pair and its close in a child with `RDMA_TRACE=trace`: the `[rdma:rs]` lines. */
function rsTraceLines(traceSpec) {
  const code = `import(${JSON.stringify(PAIR)}).then(({ withRsPair }) => withRsPair({}, async () => {}))`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], {
    env: { ...process.env, RDMA_TRACE: traceSpec },
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.equal(r.status, 0, r.stderr);
  return r.stderr.split('\n').filter((l) => l.startsWith('[rdma:rs] '));
}

test('RDMA_TRACE=rs traces the listener going bound, then listening', T, () => {
  const lines = rsTraceLines('rs');
  assert.ok(lines.includes('[rdma:rs] RSL[1] init -> bound (bind)'), lines.join('\n'));
  assert.ok(lines.includes('[rdma:rs] RSL[1] bound -> listening (listen)'), lines.join('\n'));
  assert.ok(lines.includes('[rdma:rs] RS[1] init -> resolving_addr (connect)'), lines.join('\n'));
  assert.ok(lines.indexOf('[rdma:rs] RSL[1] bound -> listening (listen)') < lines.indexOf('[rdma:rs] RS[1] init -> resolving_addr (connect)'));
});

test('RDMA_TRACE=all traces rsocket; all,-rs and other tracers alone do not', T, () => {
  assert.ok(rsTraceLines('all').includes('[rdma:rs] RSL[1] init -> bound (bind)'));
  assert.deepEqual(rsTraceLines('all,-rs'), []);
  assert.deepEqual(rsTraceLines('cm,qp'), []);
});
