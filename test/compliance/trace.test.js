// Subscribing from code to the trace channels (node:diagnostics_channel) receives structured
// messages for a known exchange — an rsocket connect, accept and close — on every device that
// connects RDMA_PS_TCP ids; unsubscribing stops them.
import test from 'node:test';
import assert from 'node:assert/strict';
import dc from 'node:diagnostics_channel';
import { TraceMessage, TRACE_CHANNELS, TRACE_NAMES, TransportType, tracing, setTrace } from '../../dist/index.js';
import { withRsPair, sendAll, recvAll, fixed } from '../lib/rs-pair.js';
import { forEachDevice, Cap } from '../lib/devices.js';

const T = { timeout: 30_000 };
// No printer, whatever RDMA_TRACE / NODE_DEBUG the runner has: only this file's subscribers.
setTrace('');

/** Subscribe to every channel; `stop()` unsubscribes and returns what arrived. */
function record() {
  const got = [];
  const subs = TRACE_NAMES.map((n) => {
    const fn = (m, name) => got.push({ m, name });
    dc.subscribe(TRACE_CHANNELS[n], fn);
    return () => dc.unsubscribe(TRACE_CHANNELS[n], fn);
  });
  return {
    got,
    stop() {
      for (const u of subs) u();
      return got;
    },
  };
}

const find = (got, pred) => got.map((g) => g.m).filter(pred);

forEachDevice([Cap.CM_TCP], (d) => {
  test('an rsocket connect publishes cm, qp and rs messages, structured, on their channels', T, async () => {
    const r = record();
    assert.equal(tracing('cm') && tracing('rs'), true);
    await withRsPair({}, async ({ c, s }) => {
      await sendAll(c, Buffer.from('hello'), fixed(5));
      c.shutdown(1);
      assert.equal((await recvAll(s, 64, fixed(64))).toString(), 'hello');
    });
    const got = r.stop();
    for (const { m, name } of got) {
      assert.ok(m instanceof TraceMessage);
      assert.equal(name, `rdmacm:${m.subsystem}`);
      assert.equal(typeof m.text, 'string');
    }
    // cm: the ids' events, each naming the id and the event by its librdmacm name.
    const cmEvents = find(got, (m) => m.subsystem === 'cm' && m.event === 'event');
    const established = cmEvents.filter((m) => m.fields.event === 'RDMA_CM_EVENT_ESTABLISHED');
    assert.equal(established.length, 2, cmEvents.map(String).join('\n'));
    for (const m of established) {
      assert.equal(m.objectType, 'ID');
      assert.equal(typeof m.objectId, 'number');
      assert.equal(m.fields.status, 0);
      assert.equal(m.text, 'event RDMA_CM_EVENT_ESTABLISHED status 0');
    }
    assert.ok(cmEvents.some((m) => m.fields.event === 'RDMA_CM_EVENT_CONNECT_REQUEST'));
    assert.ok(find(got, (m) => m.subsystem === 'cm' && m.event === 'state' && m.objectType === 'ID' && m.fields.to === 'CONNECT').length > 0);
    // qp: the connection's QPs reach RTS.
    const rts = find(got, (m) => m.subsystem === 'qp' && m.event === 'state' && m.fields.to === 'RTS');
    assert.ok(rts.length >= 2, rts.map(String).join('\n'));
    for (const m of rts) assert.equal(m.objectType, 'QP');
    // rs: the listener binds and listens, the connection goes through its states, and its close
    // sends a DISCONNECT.
    const rs = find(got, (m) => m.subsystem === 'rs');
    const lst = rs.filter((m) => m.objectType === 'RSL' && m.event === 'state').map((m) => [m.fields.from, m.fields.to, m.fields.why]);
    assert.deepEqual(lst.slice(0, 2), [['init', 'bound', 'bind'], ['bound', 'listening', 'listen']]);
    assert.ok(rs.some((m) => m.objectType === 'RS' && m.event === 'state' && m.fields.from === 'init' && m.fields.to === 'resolving_addr'), rs.map(String).join('\n'));
    assert.ok(rs.some((m) => m.objectType === 'RS' && m.event === 'state' && m.fields.to === 'connected|readable|writable'));
    assert.ok(rs.some((m) => m.event === 'rs-send' && m.fields.message === 'CTRL DISCONNECT' && m.text === 'send CTRL DISCONNECT'), rs.map(String).join('\n'));
    // tx / rx: the data path of the connection's QPs.
    const tx = find(got, (m) => m.subsystem === 'tx');
    const rx = find(got, (m) => m.subsystem === 'rx');
    assert.ok(tx.length > 0 && rx.length > 0, `tx ${tx.length}, rx ${rx.length}`);
    for (const m of [...tx, ...rx]) assert.equal(m.objectType, 'QP');
    const [txEvent, rxEvent] = d.transportType === TransportType.IWARP ? ['send', 'recv'] : ['packet', 'request'];
    assert.ok(tx.every((m) => m.event === txEvent), tx.map(String).join('\n'));
    assert.ok(rx.every((m) => m.event === rxEvent), rx.map(String).join('\n'));
    assert.ok(tx.every((m) => typeof m.fields.opcode === 'string'));
    // The transport's own connection manager: MPA on iWARP, CM MADs on RoCE.
    if (d.transportType === TransportType.IWARP) {
      const req = find(got, (m) => m.subsystem === 'mpa' && m.event === 'mpa-request');
      assert.equal(req.length, 1);
      assert.equal(req[0].objectType, 'CEP');
      assert.equal(typeof req[0].fields.privateDataLength, 'number');
      assert.equal(find(got, (m) => m.event === 'mpa-reply').length, 1);
    } else {
      const kinds = find(got, (m) => m.subsystem === 'cm' && m.event === 'mad').map((m) => m.fields.kind);
      for (const k of ['REQ', 'REP', 'RTU']) assert.ok(kinds.includes(k), kinds.join(','));
    }
  });

  test('after unsubscribing, the same exchange publishes nothing more', T, async () => {
    const r = record();
    await withRsPair({}, async () => {});
    const n = r.stop().length;
    assert.ok(n > 0);
    for (const name of TRACE_NAMES) assert.equal(tracing(name), false, name);
    await withRsPair({}, async () => {});
    assert.equal(r.got.length, n);
  });
});
