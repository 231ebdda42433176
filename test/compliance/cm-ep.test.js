// rdma_create_ep / rdma_get_request / rdma_destroy_ep and the rdma_verbs.h functions, on every
// device that connects RDMA_PS_TCP ids (pinned to it): the passive
// endpoint creates each connection's QP from the saved attributes; registration, posting (with
// buffer views or MR addresses, inline without an MR), RDMA Read/Write, and waiting for one
// completion through the channels rdma_create_qp made; rdma_post_ud_send on devices with UD ids.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createEp, destroyEp, getaddrinfo, RAI, PortSpace, SendFlags, WcOpcode, WcStatus, CmEventType, createId, RDMA_UDP_QKEY,
  postUdSend, regMsgs, regRead, regWrite, deregMr, postRecv, postSend, postSendv, postRead, postWrite, getSendComp, getRecvComp, sgeOf,
} from '../../dist/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';

const ATTR = () => ({ cap: { maxSendWr: 4, maxRecvWr: 4, maxSendSge: 1, maxRecvSge: 1, maxInlineData: 16 }, sqSigAll: true });

forEachDevice([Cap.RC, Cap.CM_TCP], () => {
  test('create_ep passive + get_request: the new id has its QP; active create_ep resolves and creates the QP; caps written back', async () => {
    const pres = await getaddrinfo('127.0.0.1', '0', { flags: RAI.PASSIVE, portSpace: PortSpace.TCP });
    const listen = await createEp(pres, null, ATTR());
    assert.equal(listen.isSync, true);
    assert.equal(listen.qp, null, 'no QP on the listening endpoint');
    await listen.listen(0);

    const ares = await getaddrinfo('127.0.0.1', String(listen.srcPort), { portSpace: PortSpace.TCP });
    const attr = ATTR();
    const id = await createEp(ares, null, attr);
    assert.equal(id.state, 'ROUTE_RESOLVED');
    assert.ok(id.qp, 'QP created');
    assert.equal(attr.cap.maxInlineData >= 16, true, 'actual caps written back (siw: 80)');

    const serverSide = (async () => {
      const child = await listen.getRequest();
      assert.ok(child.qp, 'rdma_get_request created the QP');
      assert.ok(child.qp.cap.maxSendWr >= 4, 'at least the WRs asked for (rxe rounds queues up to 2^k - 1)');
      assert.equal(child.event.event, CmEventType.CONNECT_REQUEST);
      const recv = Buffer.alloc(16);
      const mr = regMsgs(child, recv);
      postRecv(child, 'r1', recv, 16, mr);
      await child.accept();
      const wc = await getRecvComp(child);
      assert.equal(wc.wrId, 'r1');
      assert.equal(wc.status, WcStatus.SUCCESS);
      assert.equal(recv.toString(), 'sixteen bytes!!!');
      // Reply inline without an MR; the buffer may change right after posting.
      const reply = Buffer.from('and back again..');
      postSend(child, 's1', reply, 16, null, SendFlags.INLINE);
      reply.fill(0);
      const sc = await getSendComp(child);
      assert.equal(sc.opcode, WcOpcode.SEND);
      return { child, mr };
    })();

    const rbuf = Buffer.alloc(32);
    const rmr = regMsgs(id, rbuf);
    // A view inside the MR is an address too.
    postRecv(id, 7, rbuf.subarray(16), 16, rmr);
    await id.connect();
    const sbuf = Buffer.from('sixteen bytes!!!');
    const smr = regMsgs(id, sbuf);
    postSend(id, 8, smr.addr, 16, smr, 0);
    assert.equal((await getSendComp(id)).wrId, 8);
    const wc = await getRecvComp(id);
    assert.equal(wc.wrId, 7);
    assert.equal(rbuf.subarray(16).toString(), 'and back again..');
    const server = await serverSide;
    assert.throws(() => postRecv(id, 1, Buffer.alloc(4), 4, rmr), { code: 'EINVAL' }, 'a buffer outside the MR');
    assert.throws(() => postSend(id, 1, sbuf, 16, null, 0), { code: 'EINVAL' }, 'no MR and not inline');
    // Both ends disconnect (on IB a synchronous rdma_disconnect returns with the peer's DREP).
    await Promise.all([server.child.disconnect(), id.disconnect().catch(() => {})]);
    deregMr(server.mr);
    await destroyEp(server.child);
    deregMr(rmr);
    deregMr(smr);
    await destroyEp(id);
    await destroyEp(listen);
  });

  test('rdma_post_read / rdma_post_write with reg_read / reg_write memory', async () => {
    const pres = await getaddrinfo('127.0.0.1', '0', { flags: RAI.PASSIVE });
    const listen = await createEp(pres, null, ATTR());
    await listen.listen(0);
    const src = Buffer.from('remote data to read, 32 bytes!!!');
    assert.equal(src.length, 32);
    let info;
    const ready = new Promise((r) => (info = r));
    const serverSide = (async () => {
      const child = await listen.getRequest();
      const readable = regRead(child, src);
      const sink = Buffer.alloc(32);
      const writable = regWrite(child, sink);
      await child.accept({ responderResources: 1, initiatorDepth: 1 });
      info({ readable, writable, sink });
      return { child, readable, writable };
    })();
    const id = await createEp(await getaddrinfo('127.0.0.1', String(listen.srcPort)), null, ATTR());
    await id.connect({ responderResources: 1, initiatorDepth: 1 });
    const { readable, writable, sink } = await ready;
    const dst = Buffer.alloc(32);
    const dmr = regMsgs(id, dst);
    postRead(id, 'rd', dst, 32, dmr, SendFlags.SIGNALED, readable.addr, readable.rkey);
    let wc = await getSendComp(id);
    assert.equal(wc.opcode, WcOpcode.RDMA_READ);
    assert.equal(wc.status, WcStatus.SUCCESS);
    assert.equal(dst.toString(), src.toString());
    dst.write('written by RDMA Write, 32 bytes', 0);
    postWrite(id, 'wr', dst, 31, dmr, SendFlags.SIGNALED, writable.addr, writable.rkey);
    wc = await getSendComp(id);
    assert.equal(wc.opcode, WcOpcode.RDMA_WRITE);
    // The Write is visible at the target once a later Send arrives behind it.
    const { child } = await serverSide;
    const rb = Buffer.alloc(4);
    const rbm = regMsgs(child, rb);
    postRecv(child, 'x', rb, 4, rbm);
    postSendv(id, 'ping', [sgeOf(dmr, dst, 4)], 0);
    await getRecvComp(child);
    assert.equal(sink.subarray(0, 31).toString(), 'written by RDMA Write, 32 bytes'.slice(0, 31));
    await Promise.all([id.disconnect(), child.disconnect().catch(() => {})]);
    for (const m of [dmr]) deregMr(m);
    await destroyEp(id);
    for (const m of [readable, writable, rbm]) deregMr(m);
    await destroyEp(child);
    await destroyEp(listen);
  });

  test('create_ep errors: a non-local passive address (EADDRNOTAVAIL), nobody listening (sync connect ECONNREFUSED)', async () => {
    await assert.rejects(createEp(await getaddrinfo('203.0.113.77', '7471', { flags: RAI.PASSIVE }), null, ATTR()), { code: 'EADDRNOTAVAIL' });
    const id = await createEp(await getaddrinfo('127.0.0.1', '1'), null, ATTR());
    await assert.rejects(id.connect(), { code: 'ECONNREFUSED', errno: 111 });
    await destroyEp(id);
  });
});

forEachDevice([Cap.UD, Cap.CM_UDP, Cap.AH], () => {
  test('rdma_post_ud_send: a datagram to the peer the UD connect found (its AH and QP number), from an MR and inline; RDMA_UDP_QKEY; an id without a QP: EINVAL', async () => {
    const listen = createId(null, null, PortSpace.UDP);
    listen.bindAddr({ address: '127.0.0.1', port: 0 });
    await listen.listen(0);
    const got = Buffer.alloc(2 * 1064);
    const serverSide = (async () => {
      const child = await listen.getRequest();
      child.createQp(null, { cap: { maxRecvWr: 2, maxSendWr: 1 } });
      const mr = regMsgs(child, got);
      postRecv(child, 'r1', got.subarray(0, 1064), 1064, mr);
      postRecv(child, 'r2', got.subarray(1064), 1064, mr);
      await child.accept();
      return { child, mr };
    })();
    const id = createId(null, null, PortSpace.UDP);
    assert.throws(() => postUdSend(id, 1, Buffer.alloc(4), 4, null, SendFlags.INLINE, null, 1), { code: 'EINVAL' }, 'no QP');
    await id.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort });
    await id.resolveRoute();
    id.createQp(null, { cap: { maxSendWr: 2, maxRecvWr: 1, maxInlineData: 16 } });
    await id.connect();
    const { child, mr: rmr } = await serverSide;
    const ud = id.event.param.ud;
    assert.equal(ud.qpNum, child.qp.qpNum);
    assert.equal(ud.qkey, RDMA_UDP_QKEY);
    const ah = id.pd.createAh(ud.ahAttr);
    const msg = Buffer.from('one datagram');
    const smr = regMsgs(id, msg);
    postUdSend(id, 'u1', msg, msg.length, smr, SendFlags.SIGNALED, ah, ud.qpNum);
    let wc = await getSendComp(id);
    assert.equal(wc.wrId, 'u1');
    assert.equal(wc.status, WcStatus.SUCCESS);
    wc = await getRecvComp(child);
    assert.equal(wc.wrId, 'r1');
    assert.equal(wc.status, WcStatus.SUCCESS);
    assert.equal(wc.srcQp, id.qp.qpNum);
    assert.equal(got.subarray(40, 40 + msg.length).toString(), 'one datagram', 'after the 40-byte GRH');
    const inl = Buffer.from('inline!');
    postUdSend(id, 'u2', inl, inl.length, null, SendFlags.SIGNALED | SendFlags.INLINE, ah, ud.qpNum);
    inl.fill(0);
    assert.equal((await getSendComp(id)).status, WcStatus.SUCCESS);
    wc = await getRecvComp(child);
    assert.equal(wc.wrId, 'r2');
    assert.equal(got.subarray(1064 + 40, 1064 + 47).toString(), 'inline!');
    assert.throws(() => postUdSend(id, 3, msg, 4, null, 0, ah, ud.qpNum), { code: 'EINVAL' }, 'no MR and not inline');
    ah.destroy();
    deregMr(smr);
    deregMr(rmr);
    id.destroyQp();
    child.destroyQp();
    await id.destroy();
    await child.destroy();
    await listen.destroy();
  });
});
