// Disposal of the rdma_cm objects a user owns (`using` / `await using` call these): an id's
// Symbol.asyncDispose tears down in librdmacm's order — the id's events handed out are
// acknowledged, its QP and SRQ destroyed (as rdma_destroy_ep), then the id — and an event
// channel's Symbol.dispose destroys it; disposing twice does nothing. The JS here calls the
// disposers in the order `await using` would (Node 20's JavaScript has no `using` syntax; the
// TypeScript form is compiled in test/types/cm-events.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createId, createEventChannel, createEp, getaddrinfo, PortSpace, CmEventType, RAI, QpState } from '../../dist/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';
import { expectEvent } from '../lib/cm.js';

forEachDevice([Cap.RC, Cap.CM_TCP], () => {
  test('await using a connected pair with events not acknowledged: the ids, their QPs and the channels go, in librdmacm order', async () => {
    const sch = createEventChannel();
    const cch = createEventChannel();
    const listen = createId(sch, null, PortSpace.TCP);
    listen.bindAddr({ address: '127.0.0.1', port: 0 });
    await listen.listen();
    const id = createId(cch, null, PortSpace.TCP);
    await id.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort });
    (await expectEvent(cch, CmEventType.ADDR_RESOLVED)).ack();
    await id.resolveRoute();
    (await expectEvent(cch, CmEventType.ROUTE_RESOLVED)).ack();
    const qp = id.createQp(null, {});
    await id.connect();
    const req = await expectEvent(sch, CmEventType.CONNECT_REQUEST);
    const child = req.id;
    const cqp = child.createQp(null, {});
    await child.accept();
    // Handed out, not acknowledged: rdma_destroy_id alone would wait for these.
    await expectEvent(cch, CmEventType.ESTABLISHED);
    await expectEvent(sch, CmEventType.ESTABLISHED);
    // The scope ends: disposed in reverse order of declaration.
    for (const o of [child, id, listen]) await o[Symbol.asyncDispose]();
    for (const ch of [cch, sch]) ch[Symbol.dispose]();
    assert.ok(id.destroyed && child.destroyed && listen.destroyed);
    assert.equal(id.qp, null);
    assert.equal(child.qp, null);
    assert.throws(() => qp.modify({ qpState: QpState.ERR }));
    assert.throws(() => cqp.modify({ qpState: QpState.ERR }));
    assert.ok(cch.isDestroyed && sch.isDestroyed);
    // Twice: nothing.
    await id[Symbol.asyncDispose]();
    cch[Symbol.dispose]();
    await cch[Symbol.asyncDispose]();
    assert.ok(req);
  });

  test('an event channel disposed while ids use it: EBUSY (declare it before its ids)', async () => {
    const ch = createEventChannel();
    const id = createId(ch, null, PortSpace.TCP);
    assert.throws(() => ch[Symbol.dispose](), { code: 'EBUSY' });
    await assert.rejects(ch[Symbol.asyncDispose](), { code: 'EBUSY' });
    await id[Symbol.asyncDispose]();
    ch[Symbol.dispose]();
  });

  test('rdma_create_ep results dispose as rdma_destroy_ep: QP and id', async () => {
    const passive = await createEp(await getaddrinfo('127.0.0.1', '0', { flags: RAI.PASSIVE }), null, { cap: { maxSendWr: 1, maxRecvWr: 1 } });
    await passive.listen();
    const res = await getaddrinfo('127.0.0.1', String(passive.srcPort));
    const active = await createEp(res, null, { cap: { maxSendWr: 1, maxRecvWr: 1 } });
    assert.ok(active.qp);
    await active[Symbol.asyncDispose]();
    assert.ok(active.destroyed);
    assert.equal(active.qp, null);
    await passive[Symbol.asyncDispose]();
    await passive[Symbol.asyncDispose]();
    assert.ok(passive.destroyed);
  });
});
