// Tracing through node:diagnostics_channel: a subsystem is on exactly while its channel has
// subscribers (however they subscribed), messages are structured with their text derived, and the
// stderr printer (RDMA_TRACE, NODE_DEBUG=rdmacm, setTrace) is one more subscriber.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dc from 'node:diagnostics_channel';
import { AsyncLocalStorage } from 'node:async_hooks';
import { spawnSync } from 'node:child_process';
import { TRACE_NAMES, TRACE_CHANNELS, TraceMessage, tracing, setTrace, enableTrace, disableTrace, printedTraces } from '../../dist/index.js';
import { traceEvent, trace } from '../../dist/trace.js';
import { StateCell } from '../../dist/util/state.js';

const INDEX = new URL('../../dist/index.js', import.meta.url).href;
// The in-process tests start from no printer, whatever RDMA_TRACE / NODE_DEBUG the runner has.
setTrace('');
const STATE = new URL('../../dist/util/state.js', import.meta.url).href;

test('one channel per subsystem, named rdmacm:<name>', () => {
  assert.deepEqual([...TRACE_NAMES], ['cm', 'qp', 'mpa', 'rx', 'tx', 'cq', 'mr', 'llp', 'roce', 'rs']);
  for (const n of TRACE_NAMES) assert.equal(TRACE_CHANNELS[n], `rdmacm:${n}`);
});

test('a subsystem is on while its channel has subscribers, by every way of subscribing', () => {
  for (const n of TRACE_NAMES) assert.equal(tracing(n), false, n);
  const fn = () => {};
  dc.subscribe('rdmacm:cm', fn);
  assert.equal(tracing('cm'), true);
  assert.equal(tracing('qp'), false);
  dc.unsubscribe('rdmacm:cm', fn);
  assert.equal(tracing('cm'), false);

  const ch = dc.channel('rdmacm:tx');
  ch.subscribe(fn);
  ch.subscribe(fn);
  assert.equal(tracing('tx'), true);
  assert.equal(ch.unsubscribe(fn), true);
  assert.equal(tracing('tx'), true, 'one subscription left');
  assert.equal(ch.unsubscribe(fn), true);
  assert.equal(ch.unsubscribe(fn), false);
  assert.equal(tracing('tx'), false);

  const store = new AsyncLocalStorage();
  ch.bindStore(store);
  assert.equal(tracing('tx'), ch.hasSubscribers);
  ch.unbindStore(store);
  assert.equal(tracing('tx'), false);
});

test('a subscriber receives TraceMessages: subsystem, event, object identity, fields, derived text', () => {
  const got = [];
  const fn = (m, name) => got.push([m, name]);
  dc.subscribe('rdmacm:qp', fn);
  try {
    const cell = new StateCell('qp', () => 'QP[17]', 'RESET');
    cell.move('INIT', 'modify_qp');
    traceEvent('tx', 'QP[17]', 'send', { opcode: 'SEND', bytes: 5, msn: 1 }); // nobody on tx
    trace('qp', 'roce:4791', 'claimed QPN block 3');
  } finally {
    dc.unsubscribe('rdmacm:qp', fn);
  }
  assert.equal(got.length, 2);
  const [[m, name], [note]] = got;
  assert.equal(name, 'rdmacm:qp');
  assert.ok(m instanceof TraceMessage);
  assert.equal(m.subsystem, 'qp');
  assert.equal(m.event, 'state');
  assert.equal(m.object, 'QP[17]');
  assert.equal(m.objectType, 'QP');
  assert.equal(m.objectId, 17);
  assert.deepEqual(m.fields, { from: 'RESET', to: 'INIT', why: 'modify_qp' });
  assert.equal(m.text, 'RESET -> INIT (modify_qp)');
  assert.equal(String(m), 'QP[17] RESET -> INIT (modify_qp)');
  assert.deepEqual(JSON.parse(JSON.stringify(m)), {
    subsystem: 'qp', event: 'state', object: 'QP[17]', objectType: 'QP', objectId: 17,
    fields: { from: 'RESET', to: 'INIT', why: 'modify_qp' }, text: 'RESET -> INIT (modify_qp)',
  });
  assert.equal(note.event, 'note');
  assert.equal(note.objectType, 'roce');
  assert.equal(note.objectId, 4791);
  assert.equal(note.text, 'claimed QPN block 3');
});

test('object identities: hex keys stay strings, a bare name has no id', () => {
  const mk = (o) => new TraceMessage('mr', o, 'note', { text: '' });
  assert.deepEqual([mk('MR[0x00abcd00]').objectType, mk('MR[0x00abcd00]').objectId], ['MR', '0x00abcd00']);
  assert.deepEqual([mk('siw_lo').objectType, mk('siw_lo').objectId], ['siw_lo', undefined]);
  assert.deepEqual([mk('IBCM[0x1f]').objectType, mk('IBCM[0x1f]').objectId], ['IBCM', '0x1f']);
});

test('the text of each event is derived from its fields', () => {
  const t = (event, fields) => new TraceMessage('tx', 'QP[1]', event, fields).text;
  assert.equal(t('event', { event: 'RDMA_CM_EVENT_ESTABLISHED', status: 0 }), 'event RDMA_CM_EVENT_ESTABLISHED status 0');
  assert.equal(t('send', { opcode: 'RDMA_WRITE', bytes: 64, stag: '0x00000a01' }), 'RDMA_WRITE 64 bytes stag 0x00000a01');
  assert.equal(t('send', { opcode: 'SEND', bytes: 9000, msn: 3, zeroCopy: true, fpdus: 3 }), 'SEND 9000 bytes msn 3 (zero-copy, 3 FPDUs)');
  assert.equal(t('recv', { opcode: 'READ_RESP', bytes: 8 }), 'READ_RESP complete 8 bytes');
  assert.equal(t('packet', { transport: 'RC', opcode: 'SEND', psn: 5, index: 1, count: 2 }), 'RC SEND psn 5 (1/2)');
  assert.equal(t('datagram', { opcode: 'SEND', bytes: 12, to: '10.0.0.2', remoteQpn: 0x11 }), 'UD SEND 12B -> 10.0.0.2 QPN 0x11');
  assert.equal(t('mad', { kind: 'REQ', to: '10.0.0.2' }), 'REQ -> 10.0.0.2');
  assert.equal(t('rs-send', { message: 'CTRL DISCONNECT' }), 'send CTRL DISCONNECT');
});

test('enableTrace / disableTrace / setTrace attach and detach the stderr printer', () => {
  assert.deepEqual(printedTraces(), []);
  enableTrace('cm', 'rs');
  assert.deepEqual(printedTraces(), ['cm', 'rs']);
  assert.equal(tracing('cm'), true);
  assert.equal(dc.channel('rdmacm:cm').hasSubscribers, true);
  disableTrace('cm');
  assert.equal(tracing('cm'), false);
  setTrace('all,-rx,-tx');
  assert.deepEqual(printedTraces(), ['cm', 'qp', 'mpa', 'cq', 'mr', 'llp', 'roce', 'rs']);
  const fn = () => {};
  dc.subscribe('rdmacm:qp', fn);
  setTrace('');
  assert.deepEqual(printedTraces(), []);
  assert.equal(tracing('qp'), true, 'a tool still subscribes');
  dc.unsubscribe('rdmacm:qp', fn);
  for (const n of TRACE_NAMES) assert.equal(tracing(n), false, n);
});

/** Run `src` (an ES module body) in a child with `env`; its stdout and stderr. */
function child(src, env) {
  const clean = { ...process.env };
  delete clean.RDMA_TRACE;
  delete clean.NODE_DEBUG;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', src], { encoding: 'utf8', timeout: 20_000, env: { ...clean, ...env } });
  assert.equal(r.status, 0, r.stderr);
  return r;
}

const CELLS = `
  const { StateCell } = await import(${JSON.stringify(STATE)});
  new StateCell('cm', () => 'ID[1]', 'idle').move('addr_query', 'resolve_addr');
  new StateCell('rs', () => 'RS[2]', 'init').move('connected', 'connect');
  console.log(process.pid);`;

test('RDMA_TRACE prints [rdma:<name>] <object> <text> to stderr, RDMA_TRACE syntax kept', () => {
  assert.deepEqual(child(CELLS, { RDMA_TRACE: 'all,-rs' }).stderr.split('\n').filter(Boolean), ['[rdma:cm] ID[1] idle -> addr_query (resolve_addr)']);
  assert.deepEqual(child(CELLS, { RDMA_TRACE: 'rs' }).stderr.split('\n').filter(Boolean), ['[rdma:rs] RS[2] init -> connected (connect)']);
  assert.equal(child(CELLS, {}).stderr, '');
});

test("NODE_DEBUG=rdmacm prints every subsystem in util.debuglog's form, RDMACM <pid>: <name> <object> <text>", () => {
  const r = child(CELLS, { NODE_DEBUG: 'rdmacm' });
  const pid = r.stdout.trim();
  assert.deepEqual(r.stderr.split('\n').filter(Boolean), [`RDMACM ${pid}: cm ID[1] idle -> addr_query (resolve_addr)`, `RDMACM ${pid}: rs RS[2] init -> connected (connect)`]);
  const picked = child(CELLS, { NODE_DEBUG: 'net,rdmacm', RDMA_TRACE: 'rs' });
  assert.deepEqual(picked.stderr.split('\n').filter((l) => l.startsWith('RDMACM')), [`RDMACM ${picked.stdout.trim()}: rs RS[2] init -> connected (connect)`]);
  assert.equal(child(CELLS, { NODE_DEBUG: 'http' }).stderr, '');
});

test('setTrace switches printing at run time in a process started without RDMA_TRACE', () => {
  const src = `
    const { setTrace } = await import(${JSON.stringify(INDEX)});
    const { StateCell } = await import(${JSON.stringify(STATE)});
    const c = new StateCell('qp', () => 'QP[5]', 'A');
    c.move('B', 'before');
    setTrace('qp');
    c.move('C', 'on');
    setTrace('all,-qp');
    c.move('D', 'off');`;
  assert.deepEqual(child(src, {}).stderr.split('\n').filter(Boolean), ['[rdma:qp] QP[5] B -> C (on)']);
});

test('a subscription made before the package loads is honoured', () => {
  const src = `
    import dc from 'node:diagnostics_channel';
    const got = [];
    dc.subscribe('rdmacm:qp', (m) => got.push(String(m)));
    const { tracing } = await import(${JSON.stringify(INDEX)});
    const { StateCell } = await import(${JSON.stringify(STATE)});
    new StateCell('qp', () => 'QP[9]', 'RESET').move('INIT', 'modify_qp');
    console.log(JSON.stringify({ on: tracing('qp'), got }));`;
  assert.deepEqual(JSON.parse(child(src, {}).stdout), { on: true, got: ['QP[9] RESET -> INIT (modify_qp)'] });
});

test('NODE_DEBUG=rdmacm with RDMA_TRACE=cm,rs: an rsocket connect in a child, every line in the debuglog form', { timeout: 60_000 }, () => {
  const pair = new URL('../lib/rs-pair.js', import.meta.url).href;
  const src = `
    const { withRsPair } = await import(${JSON.stringify(pair)});
    await withRsPair({}, async () => {});
    console.log(process.pid);`;
  const r = child(src, { NODE_DEBUG: 'rdmacm', RDMA_TRACE: 'cm,rs' });
  const pid = r.stdout.trim();
  const lines = r.stderr.split('\n').filter(Boolean);
  const form = new RegExp(`^RDMACM ${pid}: (cm|rs) \\S+ .+$`);
  for (const l of lines) assert.match(l, form);
  assert.ok(lines.includes(`RDMACM ${pid}: rs RSL[1] init -> bound (bind)`), lines.join('\n'));
  assert.equal(lines.filter((l) => / cm ID\[\d+\] event RDMA_CM_EVENT_ESTABLISHED status 0$/.test(l)).length, 2, lines.join('\n'));
});
