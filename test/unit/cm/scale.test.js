// Many ids at once: one listener (rdma_listen backlog 0, i.e. the kernel's 1024) serves 1000
// clients that all connect at the same time on loopback, without losing one; every id sees its
// events in the CM state machine's order, every connection carries a message, and all of them
// disconnect cleanly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createId, createEventChannel, PortSpace, CmEventType, Access, WrOpcode, SendFlags, WcStatus } from '../../../dist/index.js';

const N = 1000;
const E = CmEventType;

test(`one listener, ${N} concurrent clients: all connect, exchange a message, disconnect`, async () => {
  const t0 = performance.now();
  // One deadline for the whole test (a fresh AbortSignal per wait costs more than the CM work).
  const deadline = AbortSignal.timeout(60_000);
  const sch = createEventChannel();
  const cch = createEventChannel();
  const listen = createId(sch, 'listener', PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(0);
  const port = listen.srcPort;

  const clientLog = new Map();
  const serverLog = new Map();
  const children = [];
  const clients = [];
  let serverEstablished = 0;
  let serverDisconnected = 0;
  let received = 0;

  // Server: accept every request with a QP that has one receive posted.
  const serverDone = (async () => {
    while (serverDisconnected < N) {
      const ev = await sch.getEvent(deadline);
      const id = ev.id;
      if (!serverLog.has(id)) serverLog.set(id, []);
      serverLog.get(id).push(ev.event);
      const type = ev.event;
      if (type === E.CONNECT_REQUEST) assert.equal(ev.listenId, listen);
      ev.ack();
      if (type === E.CONNECT_REQUEST) {
        children.push(id);
        id.createQp(null, { cap: { maxSendWr: 1, maxRecvWr: 1 } });
        const mr = id.pd.regMr(Buffer.alloc(8), Access.LOCAL_WRITE);
        id.mr = mr;
        id.qp.postRecv({ wrId: 1, sgList: [{ addr: mr.addr, length: 8, lkey: mr.lkey }] });
        await id.accept();
      } else if (type === E.ESTABLISHED) serverEstablished++;
      else if (type === E.DISCONNECTED) {
        const wc = id.recvCq.poll(1);
        if (wc.length === 1 && wc[0].status === WcStatus.SUCCESS && wc[0].byteLen === 8) received++;
        serverDisconnected++;
      } else assert.fail(`unexpected server event ${type} status ${ev.status}`);
    }
  })();

  for (let i = 0; i < N; i++) {
    const id = createId(cch, i, PortSpace.TCP);
    clients.push(id);
    clientLog.set(id, []);
    await id.resolveAddr(null, { address: '127.0.0.1', port }, 2000);
  }
  let established = 0;
  while (established < N) {
    const ev = await cch.getEvent(deadline);
    const id = ev.id;
    clientLog.get(id).push(ev.event);
    const type = ev.event;
    const status = ev.status;
    ev.ack();
    if (type === E.ADDR_RESOLVED) await id.resolveRoute(2000);
    else if (type === E.ROUTE_RESOLVED) {
      id.createQp(null, { cap: { maxSendWr: 1, maxRecvWr: 1 } });
      await id.connect({ responderResources: 1, initiatorDepth: 1 });
    } else if (type === E.ESTABLISHED) {
      established++;
      const mr = id.pd.regMr(Buffer.from('12345678'), 0);
      id.qp.postSend({ wrId: 2, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: mr.addr, length: 8, lkey: mr.lkey }] });
      id.mr = mr;
    } else assert.fail(`client ${id.context}: unexpected event ${type} status ${status}`);
  }
  const tConnected = performance.now();
  // Let the messages land, then disconnect every connection from the client side.
  while (serverEstablished < N) await new Promise((r) => setTimeout(r, 5));
  for (const id of clients) {
    while (id.sendCq.poll(1).length === 0) await new Promise((r) => setImmediate(r));
    await id.disconnect();
  }
  let disconnected = 0;
  while (disconnected < N) {
    const ev = await cch.getEvent(deadline);
    clientLog.get(ev.id).push(ev.event);
    assert.equal(ev.event, E.DISCONNECTED);
    ev.ack();
    disconnected++;
  }
  await serverDone;

  assert.equal(children.length, N, 'every request reached the listener');
  assert.equal(serverEstablished, N);
  assert.equal(received, N, 'every connection carried its message');
  for (const [id, log] of clientLog) {
    assert.deepEqual(log, [E.ADDR_RESOLVED, E.ROUTE_RESOLVED, E.ESTABLISHED, E.DISCONNECTED], `client ${id.context}`);
  }
  for (const [, log] of serverLog) assert.deepEqual(log, [E.CONNECT_REQUEST, E.ESTABLISHED, E.DISCONNECTED]);

  for (const id of [...clients, ...children]) {
    id.mr.dereg();
    id.destroyQp();
    await id.destroy();
  }
  await listen.destroy();
  sch.destroy();
  cch.destroy();
  const tEnd = performance.now();
  process.stderr.write(`# ${N} connections: connected in ${(tConnected - t0).toFixed(0)} ms, whole test ${(tEnd - t0).toFixed(0)} ms\n`);
});
