// Cancellation of the CM calls that wait, on every device whose CM connects RDMA_PS_TCP ids: an
// AbortSignal given before or during rdma_resolve_addr, rdma_resolve_route, rdma_connect,
// rdma_accept, rdma_listen, rdma_disconnect, rdma_get_request rejects with the one AbortError and
// leaves the id where the user can retry or destroy it; rdma_destroy_id while rdma_connect waits
// rejects it with ECANCELED, and the passive side sees the request end as the kernel shows it
// (RoCE: REJECTED with the IB CM's REJ "timeout", reason 4; iWARP, as Linux siw: no event, and
// rdma_accept / rdma_reject fail with ECONNRESET). Each test leaves nothing behind: the file's
// process exits by itself.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createId, createEventChannel, createEp, getaddrinfo, PortSpace, CmEventType, CmState, QpState, RdmaError, TransportType, AbortError } from '../../dist/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';
import { expectEvent, nextEvent } from '../lib/cm.js';
import { aborted } from '../lib/fake-provider.js';
import { sleep } from '../lib/wait.js';

const LO = '127.0.0.1';
/** The IB CM's REJ reason "timeout" (IB spec 12.6.7.2; cm.c `cm_destroy_id` on a REQ in flight). */
const REJ_TIMEOUT = 4;

function ecanceled(op, re) {
  return (e) => {
    assert.ok(e instanceof RdmaError, `expected an RdmaError, got ${e}`);
    assert.equal(e.code, 'ECANCELED');
    assert.equal(e.errno, 125);
    assert.equal(e.op, op);
    assert.match(e.message, re);
    return true;
  };
}

/** An async listener on loopback: { ch, listen, port, close() }. */
async function asyncListener() {
  const ch = createEventChannel();
  const listen = createId(ch, 'L', PortSpace.TCP);
  listen.bindAddr({ address: LO, port: 0 });
  await listen.listen();
  return {
    ch,
    listen,
    port: listen.srcPort,
    async close(...children) {
      for (const c of children) {
        if (c.qp) c.destroyQp();
        if (!c.destroyed) await c.destroy();
      }
      await listen.destroy();
      ch.destroy();
    },
  };
}

/** A synchronous id resolved to `port` on loopback, with a QP. */
async function resolvedClient(port) {
  const id = createId(null, 'C', PortSpace.TCP);
  await id.resolveAddr(null, { address: LO, port });
  await id.resolveRoute();
  id.createQp(null, {});
  return id;
}

/**
 * What the passive side sees once the requester gave up on `child` (its CONNECT_REQUEST taken):
 * RoCE: REJECTED with the REJ "timeout"; iWARP: no event, and rdma_accept fails with ECONNRESET.
 */
async function requestEnded(d, ch, child) {
  if (d.transportType === TransportType.IWARP) {
    await sleep(200);
    assert.equal(ch.pending, 0, 'no event (Linux siw reports none)');
    child.createQp(null, {});
    await assert.rejects(child.accept(), (e) => e instanceof RdmaError && e.code === 'ECONNRESET' && e.op === 'rdma_accept');
  } else {
    const ev = await expectEvent(ch, CmEventType.REJECTED, 5000);
    assert.equal(ev.id, child);
    assert.equal(ev.status, REJ_TIMEOUT);
    ev.ack();
    assert.equal(child.state, CmState.DISCONNECT);
  }
}

forEachDevice([Cap.RC, Cap.CM_TCP], (d) => {
  test('rdma_destroy_id while rdma_connect waits: connect rejects with ECANCELED; the passive side sees the request end', async () => {
    const srv = await asyncListener();
    const id = await resolvedClient(srv.port);
    const connecting = id.connect();
    const req = await expectEvent(srv.ch, CmEventType.CONNECT_REQUEST);
    const child = req.id;
    req.ack();
    id.destroyQp();
    await id.destroy();
    await assert.rejects(connecting, ecanceled('rdma_connect', /destroyed while connecting/));
    await requestEnded(d, srv.ch, child);
    await srv.close(child);
  });

  test('rdma_destroy_id while an async id is in rdma_connect: the call rejects with ECANCELED or has started; nothing is reported', async () => {
    const srv = await asyncListener();
    const cch = createEventChannel();
    const id = createId(cch, 'C', PortSpace.TCP);
    await id.resolveAddr(null, { address: LO, port: srv.port });
    (await nextEvent(cch)).ack();
    await id.resolveRoute();
    (await nextEvent(cch)).ack();
    id.createQp(null, {});
    const connecting = id.connect().then(() => 'started', (e) => e);
    id.destroyQp();
    await id.destroy();
    const out = await connecting;
    if (out !== 'started') assert.ok(ecanceled('rdma_connect', /destroyed while connecting/)(out));
    assert.equal(cch.pending, 0);
    cch.destroy();
    // A request that reached the listener ends there too.
    const ev = await nextEvent(srv.ch, 500).catch(() => null);
    if (ev) {
      assert.equal(ev.event, CmEventType.CONNECT_REQUEST);
      ev.ack();
      await requestEnded(d, srv.ch, ev.id);
      await srv.close(ev.id);
    } else await srv.close();
  });

  test('an aborted signal given to each call: AbortError with the reason as cause, nothing changed', async () => {
    const reason = new Error('stop');
    const signal = AbortSignal.abort(reason);
    const id = createId(null, null, PortSpace.TCP);
    await assert.rejects(id.resolveAddr(null, { address: LO, port: 1 }, 2000, signal), aborted('rdma_resolve_addr', reason));
    assert.equal(id.state, CmState.IDLE);
    await assert.rejects(id.listen(0, signal), aborted('rdma_listen', reason));
    assert.equal(id.state, CmState.IDLE);
    await id.resolveAddr(null, { address: LO, port: 1 });
    await assert.rejects(id.resolveRoute(2000, signal), aborted('rdma_resolve_route', reason));
    assert.equal(id.state, CmState.ADDR_RESOLVED);
    await id.resolveRoute();
    id.createQp(null, {});
    await assert.rejects(id.connect(undefined, signal), aborted('rdma_connect', reason));
    assert.equal(id.state, CmState.ROUTE_RESOLVED);
    assert.equal(id.qp.state, QpState.INIT, 'the QP untouched');
    await assert.rejects(id.disconnect(signal), aborted('rdma_disconnect', reason));
    await assert.rejects(id.accept(undefined, signal), aborted('rdma_accept', reason));
    await assert.rejects(createEventChannel().getEvent(signal), aborted('rdma_get_cm_event', reason));
    id.destroyQp();
    await id.destroy();
    const l = createId(null, null, PortSpace.TCP);
    l.bindAddr({ address: LO, port: 0 });
    await l.listen();
    await assert.rejects(l.getRequest(signal), aborted('rdma_get_request', reason));
    await l.destroy();
  });

  test('rdma_resolve_addr / rdma_resolve_route aborted during the call: back to ADDR_BOUND / ADDR_RESOLVED, no event later, a retry works', async () => {
    for (const sync of [true, false]) {
      const ch = sync ? null : createEventChannel();
      const id = createId(ch, null, PortSpace.TCP);
      let ac = new AbortController();
      const p = id.resolveAddr(null, { address: LO, port: 7 }, 2000, ac.signal);
      ac.abort('why');
      if (sync) {
        await assert.rejects(p, aborted('rdma_resolve_addr', 'why'));
        assert.equal(id.state, CmState.ADDR_BOUND);
      } else await p.catch((e) => assert.ok(aborted('rdma_resolve_addr', 'why')(e)));
      await sleep(50);
      if (sync) {
        assert.equal(id.channel.pending, 0, 'the aborted resolution reports nothing');
        await id.resolveAddr(null, { address: LO, port: 7 });
        assert.equal(id.state, CmState.ADDR_RESOLVED);
        ac = new AbortController();
        const r = id.resolveRoute(2000, ac.signal);
        ac.abort();
        await assert.rejects(r, aborted('rdma_resolve_route'));
        assert.equal(id.state, CmState.ADDR_RESOLVED);
        await sleep(50);
        assert.equal(id.channel.pending, 0);
        await id.resolveRoute();
        assert.equal(id.state, CmState.ROUTE_RESOLVED);
      } else {
        // Async mode: the call had started (or was aborted before its route lookup): either way one outcome, or none.
        while (ch.pending > 0) (await nextEvent(ch)).ack();
      }
      await id.destroy();
      ch?.destroy();
    }
  });

  test('rdma_connect aborted while waiting for the answer: AbortError, ROUTE_RESOLVED again, the passive side sees the request end, a retry connects', async () => {
    const srv = await asyncListener();
    const id = await resolvedClient(srv.port);
    const ac = new AbortController();
    const connecting = id.connect(undefined, ac.signal);
    const req = await expectEvent(srv.ch, CmEventType.CONNECT_REQUEST);
    const child = req.id;
    req.ack();
    ac.abort(new Error('user gave up'));
    await assert.rejects(connecting, aborted('rdma_connect'));
    assert.equal(id.state, CmState.ROUTE_RESOLVED);
    assert.equal(id.qp.state, QpState.ERR, 'the QP to ERR, as after REJECTED');
    await requestEnded(d, srv.ch, child);
    // Retry on the same id with a fresh QP: the listener accepts this time.
    id.destroyQp();
    id.createQp(null, {});
    const again = id.connect();
    const req2 = await expectEvent(srv.ch, CmEventType.CONNECT_REQUEST);
    req2.id.createQp(null, {});
    await req2.id.accept();
    req2.ack();
    await again;
    assert.equal(id.event.event, CmEventType.ESTABLISHED);
    (await expectEvent(srv.ch, CmEventType.ESTABLISHED)).ack();
    await Promise.all([
      id.disconnect(),
      (async () => {
        (await expectEvent(srv.ch, CmEventType.DISCONNECTED)).ack();
        await req2.id.disconnect();
      })(),
    ]);
    id.destroyQp();
    await id.destroy();
    await srv.close(child, req2.id);
  });

  test('rdma_accept aborted while waiting for ESTABLISHED: AbortError, the connection torn down (the requester sees it end), the id destroyable', async () => {
    const l = createId(null, null, PortSpace.TCP);
    l.bindAddr({ address: LO, port: 0 });
    await l.listen();
    const cch = createEventChannel();
    const id = createId(cch, 'C', PortSpace.TCP);
    await id.resolveAddr(null, { address: LO, port: l.srcPort });
    (await nextEvent(cch)).ack();
    await id.resolveRoute();
    (await nextEvent(cch)).ack();
    id.createQp(null, {});
    await id.connect();
    const child = await l.getRequest();
    child.createQp(null, {});
    const ac = new AbortController();
    const accepting = child.accept(undefined, ac.signal);
    ac.abort();
    await assert.rejects(accepting, aborted('rdma_accept'));
    assert.equal(child.state, CmState.DISCONNECT);
    // The requester: its connection ends (REJECTED, or ESTABLISHED then DISCONNECTED).
    const seen = [];
    for (;;) {
      const ev = await nextEvent(cch, 5000);
      seen.push(ev.event);
      ev.ack();
      if (ev.event !== CmEventType.ESTABLISHED) break;
    }
    assert.ok([CmEventType.REJECTED, CmEventType.DISCONNECTED, CmEventType.CONNECT_ERROR].includes(seen.at(-1)), `got ${seen}`);
    child.destroyQp();
    await child.destroy();
    id.destroyQp();
    await id.destroy();
    cch.destroy();
    await l.destroy();
  });

  test('rdma_destroy_id of a synchronous listener while rdma_get_request waits: ECANCELED', async () => {
    const l = createId(null, null, PortSpace.TCP);
    l.bindAddr({ address: LO, port: 0 });
    await l.listen();
    const waiting = l.getRequest();
    await l.destroy();
    await assert.rejects(waiting, ecanceled('rdma_get_request', /destroyed while waiting for a connect request/));
  });

  test('rdma_get_request aborted: AbortError; the next request goes to the next call', async () => {
    const l = createId(null, null, PortSpace.TCP);
    l.bindAddr({ address: LO, port: 0 });
    await l.listen();
    const ac = new AbortController();
    const waiting = l.getRequest(ac.signal);
    ac.abort();
    await assert.rejects(waiting, aborted('rdma_get_request'));
    const id = await resolvedClient(l.srcPort);
    const connecting = id.connect();
    const child = await l.getRequest();
    child.createQp(null, {});
    await child.accept();
    await connecting;
    await Promise.all([id.disconnect(), child.disconnect()]);
    for (const x of [id, child]) {
      x.destroyQp();
      await x.destroy();
    }
    await l.destroy();
  });

  test('rdma_disconnect aborted while waiting for the DREP: AbortError, the disconnect goes on, the peer disconnected, destroy works', async () => {
    const srv = await asyncListener();
    const id = await resolvedClient(srv.port);
    const connecting = id.connect();
    const req = await expectEvent(srv.ch, CmEventType.CONNECT_REQUEST);
    req.id.createQp(null, {});
    await req.id.accept();
    req.ack();
    await connecting;
    (await expectEvent(srv.ch, CmEventType.ESTABLISHED)).ack();
    const ac = new AbortController();
    const closing = id.disconnect(ac.signal);
    ac.abort();
    if (d.transportType === TransportType.IWARP) {
      // iWARP's close reports DISCONNECTED at once: the call has nothing to wait for.
      await closing;
    } else {
      // RoCE: the DREP comes with the peer's rdma_disconnect; the wait for it is aborted.
      await assert.rejects(closing, aborted('rdma_disconnect'));
    }
    (await expectEvent(srv.ch, CmEventType.DISCONNECTED)).ack();
    await req.id.disconnect();
    // The DREP arrives: the id is DISCONNECT (cma.c changes state on the event, not the call).
    const until = Date.now() + 3000;
    while (id.state !== CmState.DISCONNECT && Date.now() < until) await sleep(5);
    assert.equal(id.state, CmState.DISCONNECT);
    id.destroyQp();
    await id.destroy();
    await srv.close(req.id);
  });

  test('rdma_create_ep with a signal: aborted before or during its resolution, AbortError and no id left', async () => {
    const res = await getaddrinfo(LO, '7471');
    await assert.rejects(createEp(res, null, null, AbortSignal.abort('x')), aborted('rdma_resolve_addr', 'x'));
    const ac = new AbortController();
    const p = createEp(res, null, { cap: { maxSendWr: 1, maxRecvWr: 1 } }, ac.signal);
    ac.abort('y');
    await assert.rejects(p, aborted(undefined, 'y'));
    const id = await createEp(res, null, { cap: { maxSendWr: 1, maxRecvWr: 1 } }, new AbortController().signal);
    assert.equal(id.state, CmState.ROUTE_RESOLVED);
    await id[Symbol.asyncDispose]();
  });

  test('AbortError is the package one (instanceof AbortError, name and code as Node)', async () => {
    const e = await createEventChannel().getEvent(AbortSignal.abort()).catch((x) => x);
    assert.ok(e instanceof AbortError);
    assert.equal(e.name, 'AbortError');
    assert.equal(e.code, 'ABORT_ERR');
  });
});

forEachDevice([Cap.UD, Cap.MCAST, Cap.CM_UDP], () => {
  test('rdma_join_multicast: aborted before, nothing joined; aborted while waiting for MULTICAST_JOIN, the group left again (a re-join works)', async () => {
    const group = { address: '239.254.77.1', port: 0 };
    const id = createId(null, null, PortSpace.UDP);
    id.bindAddr({ address: LO, port: 0 });
    id.createQp(null, { cap: { maxRecvWr: 2, maxSendWr: 2 } });
    const reason = new Error('no');
    await assert.rejects(id.joinMulticast(group, 'ctx', AbortSignal.abort(reason)), aborted('rdma_join_multicast', reason));
    await assert.rejects(id.leaveMulticast(group), (e) => e.code === 'EADDRNOTAVAIL', 'not joined');
    const ac = new AbortController();
    const joining = id.joinMulticastEx({ addr: group, context: 'ctx', signal: ac.signal });
    ac.abort();
    await assert.rejects(joining, aborted('rdma_join_multicast'));
    await assert.rejects(id.leaveMulticast(group), (e) => e.code === 'EADDRNOTAVAIL', 'left again');
    await assert.rejects(id.leaveMulticast(group, AbortSignal.abort()), aborted('rdma_leave_multicast'));
    await id.joinMulticast(group, 'again');
    assert.equal(id.event.event, CmEventType.MULTICAST_JOIN);
    assert.equal(id.event.mcContext, 'again');
    await id.leaveMulticast(group);
    id.destroyQp();
    await id.destroy();
  });
});
