// Reflection and amplification through the CM of the soft RoCE device, measured by counters
// (what our side sent, what it suppressed), never by time: a forged REQ to a listener that
// accepts at once gets the REP and its first resends and nothing more (the rest suppressed, the
// id ends as before); a requester that shows it is there gets every resend; streams of forged
// DREQs for unknown connections and SIDR_REQs for unknown services are answered within the
// device's reply budget (CM_REPLY_BURST + CM_REPLY_RATE_PER_S a second), every answer not sent
// counted as cm_reply_suppressed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lib, wire, roce, until } from '../../../../lib/roce.js';
import { rawCmPeer, reqFrom, LOCAL, PEER, V4 } from '../../../../lib/raw-cm.js';

const { PortSpace, CmEventType, serviceId } = lib;
const { CM_REPLY_BURST, CM_REPLY_RATE_PER_S } = await import('../../../../../dist/transport/roce/cm/reply-limit.js');
const RETRIES = 8;
const UNHEARD = 3;
roce.configureRcCm({ cmTimeoutMs: 40, cmRetries: RETRIES, timewaitMs: 60 });
let nextPort = 30000 + Math.floor(Math.random() * 20000);

/** A listener on rxe_lo whose CONNECT_REQUESTs are accepted at once; `events` lists what came. */
async function acceptingListener() {
  const ch = lib.createEventChannel();
  const port = nextPort++;
  const l = lib.createId(ch, 'L', PortSpace.TCP, { device: 'rxe_lo' });
  l.bindAddr({ address: LOCAL, port });
  await l.listen(4);
  const events = [];
  const ids = [];
  let on = true;
  const loop = (async () => {
    while (on) {
      let ev;
      try {
        ev = await ch.getEvent(AbortSignal.timeout(100));
      } catch {
        continue;
      }
      events.push(lib.rdmaEventStr(ev.event));
      if (ev.event === CmEventType.CONNECT_REQUEST) {
        ids.push(ev.id);
        ev.id.createQp(null, { cap: { maxSendWr: 1, maxRecvWr: 1 } });
        ev.ack();
        await ev.id.accept();
      } else ev.ack();
    }
  })();
  return {
    port,
    events,
    async close() {
      on = false;
      await loop;
      for (const id of ids) {
        id.destroyQp();
        await Promise.race([id.destroy().catch(() => {}), new Promise((r) => setTimeout(r, 500))]);
      }
      await l.destroy();
      ch.destroy();
    },
  };
}

const unreachable = (events) => events.filter((e) => e === 'RDMA_CM_EVENT_UNREACHABLE').length;

test('one forged REQ: the REP and its first resends reach the silent address, the later resends are suppressed and counted, the id still ends UNREACHABLE', { timeout: 30000 }, async () => {
  const peer = await rawCmPeer();
  const srv = await acceptingListener();
  try {
    const c0 = roce.counters('rxe_lo').cm_reply_suppressed;
    peer.sendMad(reqFrom(srv.port), 0x1n);
    await until(() => unreachable(srv.events) === 1, 10000);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(peer.count('REP'), 1 + UNHEARD, 'the REP and its first resends');
    assert.equal(roce.counters('rxe_lo').cm_reply_suppressed - c0, RETRIES - UNHEARD, 'the later resends suppressed');
  } finally {
    await srv.close();
    peer.close();
  }
});

test('a requester that repeats its REQ (our REP was lost) is heard from: the REP is resent until the retries run out', { timeout: 30000 }, async () => {
  const peer = await rawCmPeer();
  const srv = await acceptingListener();
  try {
    const c0 = roce.counters('rxe_lo').cm_reply_suppressed;
    const req = reqFrom(srv.port);
    peer.sendMad(req, 0x2n);
    await peer.mad('REP');
    peer.sendMad(req, 0x2n);
    await until(() => unreachable(srv.events) === 1, 10000);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(peer.count('REP'), RETRIES, 'every resend (the first REP taken off the inbox)');
    assert.equal(roce.counters('rxe_lo').cm_reply_suppressed - c0, 0);
  } finally {
    await srv.close();
    peer.close();
  }
});

/** Send `n` MADs made by `make(i)` from the peer; resolve when our side has sent or suppressed an answer to each. */
async function stream(peer, n, make) {
  const c0 = roce.counters('rxe_lo');
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const [msg, tid] = make(i);
    peer.sendMad(msg, tid);
    if (i % 50 === 49) await new Promise((r) => setImmediate(r));
  }
  await until(() => {
    const c = roce.counters('rxe_lo');
    return c.sent_pkts - c0.sent_pkts + c.cm_reply_suppressed - c0.cm_reply_suppressed >= n;
  }, 10000);
  const elapsedS = (performance.now() - t0) / 1000;
  const c = roce.counters('rxe_lo');
  return { sent: c.sent_pkts - c0.sent_pkts, suppressed: c.cm_reply_suppressed - c0.cm_reply_suppressed, elapsedS };
}

test('a stream of forged DREQs for unknown connections: DREPs within the reply budget, the rest suppressed and counted', { timeout: 30000 }, async () => {
  const peer = await rawCmPeer();
  try {
    const N = 1000;
    const r = await stream(peer, N, (i) => [{ kind: 'DREQ', localCommId: 0x9000 + i, remoteCommId: 0x3ff00000 + i, remoteQpn: 0x11, privateData: new Uint8Array(0) }, BigInt(i)]);
    assert.equal(r.sent + r.suppressed, N, 'each DREQ answered or suppressed, once');
    const budget = CM_REPLY_BURST + Math.ceil(CM_REPLY_RATE_PER_S * r.elapsedS) + 1;
    assert.ok(r.sent <= budget, `${r.sent} DREPs sent, budget ${budget} in ${r.elapsedS.toFixed(2)} s`);
    assert.ok(r.suppressed > 0);
    await until(() => peer.count('DREP') >= r.sent, 3000);
    assert.equal(peer.count('DREP'), r.sent);
  } finally {
    peer.close();
  }
});

test('a stream of forged SIDR_REQs for a service nobody offers: SIDR_REPs (status 1) within the reply budget, the rest suppressed and counted', { timeout: 30000 }, async () => {
  const peer = await rawCmPeer();
  try {
    const N = 1000;
    const port = nextPort++;
    const pd = wire.encodeCmaPrivateData({ version: 0, ipVersion: 4, srcPort: 5555, src: V4(PEER), dst: V4(LOCAL) });
    const r = await stream(peer, N, (i) => [{ kind: 'SIDR_REQ', requestId: 0x3ff00000 + i, pkey: 0xffff, reserved: 0, serviceId: serviceId(PortSpace.UDP, port), privateData: pd }, BigInt(i)]);
    assert.equal(r.sent + r.suppressed, N);
    const budget = CM_REPLY_BURST + Math.ceil(CM_REPLY_RATE_PER_S * r.elapsedS) + 1;
    assert.ok(r.sent <= budget, `${r.sent} SIDR_REPs sent, budget ${budget} in ${r.elapsedS.toFixed(2)} s`);
    assert.ok(r.suppressed > 0);
    await until(() => peer.count('SIDR_REP') >= r.sent, 3000);
    assert.ok(peer.inbox.filter((x) => x.mad?.msg.kind === 'SIDR_REP').every((x) => x.mad.msg.status === 1));
  } finally {
    peer.close();
  }
});
