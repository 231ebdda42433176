// The CM's failure paths, each with the event and status (or errno) rdma-core reports on
// iWARP: nobody listening, rdma_reject with private data, no route, no ARP answer, no MPA Reply,
// a malformed Reply, the peer process killed, destroy/migrate waiting for acknowledgements, a
// listener destroyed with requests queued, and no TIMEWAIT_EXIT on iWARP. Loopback only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { writeFileSync, readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// A short MPA Reply wait, so the UNREACHABLE case takes a fraction of siw's 10 s.
process.env.RDMACM_MPA_REPLY_TIMEOUT_MS = '400';
const { createId, createEventChannel, PortSpace, CmEventType, WcStatus, Access, RdmaError } = await import('../../../dist/index.js');
const { resolveNeighbor, nextHopV4, arpComplete } = await import('../../../dist/cm/addr.js');
const { nextEvent } = await import('../../lib/cm.js');
const { freePort } = await import('../../lib/ports.js');
const DIST_INDEX = fileURLToPath(new URL('../../../dist/index.js', import.meta.url));


/** An async client id with address and route resolved and a QP. */
async function clientTo(port, address = '127.0.0.1') {
  const ch = createEventChannel();
  const id = createId(ch, null, PortSpace.TCP);
  await id.resolveAddr(null, { address, port });
  const a = await nextEvent(ch);
  assert.equal(a.event, CmEventType.ADDR_RESOLVED);
  a.ack();
  await id.resolveRoute();
  const r = await nextEvent(ch);
  assert.equal(r.event, CmEventType.ROUTE_RESOLVED);
  r.ack();
  id.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  return { ch, id };
}

async function done(ch, ...ids) {
  for (const id of ids) {
    if (id.qp) id.destroyQp();
    if (!id.destroyed) await id.destroy();
  }
  ch?.destroy();
}

test('nobody listening: rdma_connect itself fails with ECONNREFUSED (siw connects TCP inside the call), no event', async () => {
  const { ch, id } = await clientTo(await freePort());
  await assert.rejects(id.connect(), { code: 'ECONNREFUSED', op: 'rdma_connect' });
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(ch.pending, 0);
  await done(ch, id);
});

test('rdma_reject with private data (async listener): the peer gets REJECTED with the bytes; a 252-byte and an empty reject', async () => {
  const sch = createEventChannel();
  const listen = createId(sch, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(0);
  for (const pdata of [Buffer.alloc(252, 0xab), Buffer.alloc(0), Buffer.from('server full')]) {
    const { ch, id } = await clientTo(listen.srcPort);
    await id.connect({ privateData: Buffer.from('hello') });
    const req = await nextEvent(sch);
    assert.equal(req.event, CmEventType.CONNECT_REQUEST);
    assert.equal(Buffer.from(req.param.conn.privateData).toString(), 'hello');
    const child = req.id;
    req.ack();
    assert.throws(() => child.reject(Buffer.alloc(253)), { code: 'EINVAL' }, 'more than 252 bytes of private data');
    child.reject(pdata);
    const ev = await nextEvent(ch);
    assert.equal(ev.event, CmEventType.REJECTED);
    assert.equal(ev.status, -104, 'siw reports a peer reject as -ECONNRESET');
    assert.deepEqual(Buffer.from(ev.param.conn.privateData), pdata);
    ev.ack();
    await child.destroy();
    await done(ch, id);
  }
  await done(sch, listen);
});

const NO_ROUTE = `
const { createId, createEventChannel, PortSpace, CmEventType } = await import(${JSON.stringify(DIST_INDEX)});
const out = {};
const ch = createEventChannel();
const id = createId(ch, null, PortSpace.TCP);
try { await id.resolveAddr(null, { address: '192.0.2.99', port: 7471 }, 2000); out.async = 'resolved'; } catch (e) { out.async = e.code; out.op = e.op; }
out.state = id.state;
await new Promise((r) => setTimeout(r, 50));
out.pending = ch.pending;
const s = createId(null, null, PortSpace.TCP);
try { await s.resolveAddr(null, { address: '192.0.2.99', port: 7471 }); out.sync = 'resolved'; } catch (e) { out.sync = e.code; }
process.stdout.write(JSON.stringify(out));
process.exit(0);
`;

test('no route to the destination: rdma_resolve_addr fails at once with ENETUNREACH (no event)', async (t) => {
  // In an empty network namespace nothing is routable and no packet can leave.
  const r = await new Promise((resolve) => {
    const c = spawn('unshare', ['-n', process.execPath, '--input-type=module', '-e', NO_ROUTE], { stdio: ['ignore', 'pipe', 'pipe'] });
    let o = '';
    let e = '';
    c.stdout.on('data', (d) => (o += d));
    c.stderr.on('data', (d) => (e += d));
    c.on('error', (err) => resolve({ code: -1, o, e: String(err) }));
    c.on('close', (code) => resolve({ code, o, e }));
  });
  if (r.code !== 0 && !r.o) {
    t.skip(`cannot run in an empty network namespace (unshare -n): ${r.e.trim().split('\n')[0]}`);
    return;
  }
  assert.deepEqual(JSON.parse(r.o), { async: 'ENETUNREACH', op: 'rdma_resolve_addr', state: 'ADDR_BOUND', pending: 0, sync: 'ENETUNREACH' });
});

test('neighbour resolution (ARP) as rdma_resolve_addr waits for it: -110 after the timeout, 0 once complete', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-arp-'));
  const routeFile = join(dir, 'route');
  const arpFile = join(dir, 'arp');
  // 10.77.0.0/24 on-link, default via 10.77.0.254 (little-endian hex as the kernel prints it).
  writeFileSync(
    routeFile,
    'Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n' +
      'eth9\t00000000\tFE004D0A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n' +
      'eth9\t00004D0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n',
  );
  const arp = (rows) => writeFileSync(arpFile, 'IP address       HW type     Flags       HW address            Mask     Device\n' + rows.join('\n') + '\n');
  assert.equal(nextHopV4(await import('node:fs').then((f) => f.readFileSync(routeFile, 'latin1')), '10.77.0.99'), '10.77.0.99');
  assert.equal(nextHopV4(await import('node:fs').then((f) => f.readFileSync(routeFile, 'latin1')), '192.0.2.7'), '10.77.0.254');
  assert.equal(arpComplete('x\n10.77.0.5 0x1 0x2 aa:bb:cc:dd:ee:ff * eth9', '10.77.0.5'), true);
  assert.equal(arpComplete('x\n10.77.0.5 0x1 0x0 00:00:00:00:00:00 * eth9', '10.77.0.5'), false);

  const nudged = [];
  const src = { routeFile, arpFile, trigger: (d) => nudged.push(d), pollMs: 10 };
  arp(['10.77.0.99       0x1         0x0         00:00:00:00:00:00     *        eth9']);
  const t0 = Date.now();
  assert.equal(await resolveNeighbor('10.77.0.99', 150, src), -110);
  assert.ok(Date.now() - t0 >= 140, 'waited the whole timeout');
  assert.deepEqual(nudged, ['10.77.0.99'], 'the kernel was made to ARP for it');
  arp(['10.77.0.254      0x1         0x2         02:00:00:00:00:01     *        eth9']);
  assert.equal(await resolveNeighbor('192.0.2.7', 150, src), 0, 'an off-link destination needs the gateway only');
  const late = resolveNeighbor('10.77.0.42', 1000, src);
  setTimeout(() => arp(['10.77.0.42       0x1         0x2         02:00:00:00:00:02     *        eth9']), 50);
  assert.equal(await late, 0, 'resolved once the answer arrives');
  assert.equal(await resolveNeighbor('::1', 10, src), 0, 'IPv6: not checked');
  // A multicast group (on-link by the route table, never in the ARP table) resolves at once,
  // without asking the kernel to ARP for it: mckey's rdma_resolve_addr of its group.
  writeFileSync(routeFile, readFileSync(routeFile, 'latin1') + 'eth9\t000000E0\t00000000\t0001\t0\t0\t0\t000000F0\t0\t0\t0\n');
  nudged.length = 0;
  assert.equal(nextHopV4(readFileSync(routeFile, 'latin1'), '239.77.0.1'), '239.77.0.1');
  const t1 = Date.now();
  assert.equal(await resolveNeighbor('239.77.0.1', 1000, src), 0, 'multicast: no ARP');
  assert.equal(await resolveNeighbor('::ffff:224.0.0.251', 1000, src), 0, 'multicast, v4-mapped');
  assert.equal(await resolveNeighbor('255.255.255.255', 1000, src), 0, 'broadcast: no ARP');
  assert.ok(Date.now() - t1 < 500, 'answered without waiting');
  assert.deepEqual(nudged, []);
});

test('no MPA Reply: UNREACHABLE -110 (ETIMEDOUT) after the reply timeout', async () => {
  const silent = net.createServer((s) => s.on('error', () => {}));
  await new Promise((r) => silent.listen(0, '127.0.0.1', r));
  const { ch, id } = await clientTo(silent.address().port);
  const t0 = Date.now();
  await id.connect();
  const ev = await nextEvent(ch, 5000);
  assert.equal(ev.event, CmEventType.UNREACHABLE);
  assert.equal(ev.status, -110);
  assert.ok(Date.now() - t0 >= 350);
  ev.ack();
  await done(ch, id);
  silent.close();
});

test('a malformed MPA Reply (bad key): CONNECT_ERROR with a negative status', async () => {
  const bad = net.createServer((s) => {
    s.on('error', () => {});
    s.once('data', () => s.write(Buffer.concat([Buffer.from('MPA ID Req Frame'), Buffer.from([0x10, 0x02, 0, 0])])));
  });
  await new Promise((r) => bad.listen(0, '127.0.0.1', r));
  const { ch, id } = await clientTo(bad.address().port);
  await id.connect();
  const ev = await nextEvent(ch);
  assert.equal(ev.event, CmEventType.CONNECT_ERROR);
  assert.ok(ev.status < 0);
  ev.ack();
  await done(ch, id);
  bad.close();
});

const KILLED_PEER = `
const { createId, PortSpace } = await import(${JSON.stringify(DIST_INDEX)});
const [role, port] = process.argv.slice(1);
if (role === 'client') {
  const id = createId(null, null, PortSpace.TCP);
  await id.resolveAddr(null, { address: '127.0.0.1', port: Number(port) });
  await id.resolveRoute();
  id.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  await id.connect();
} else {
  const l = createId(null, null, PortSpace.TCP);
  l.bindAddr({ address: '127.0.0.1', port: 0 });
  await l.listen(0);
  process.stdout.write(l.srcPort + '\\n');
  const c = await l.getRequest();
  c.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  await c.accept();
}
process.stdout.write('up\\n');
setInterval(() => {}, 1000);
`;

function startPeer(role, port = 0) {
  const child = spawn(process.execPath, ['--input-type=module', '-e', KILLED_PEER, role, String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = [];
  const waiters = [];
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      lines.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
      waiters.splice(0).forEach((w) => w());
    }
  });
  const line = async (n) => {
    while (lines.length <= n) await new Promise((r) => waiters.push(r));
    return lines[n];
  };
  return { child, line };
}

/** Post receives and a send that cannot complete, kill the peer, expect DISCONNECTED and flushes. */
async function expectFlushOnKill(id, ch, peer) {
  const mr = id.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
  for (let i = 0; i < 3; i++) id.qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
  peer.child.kill('SIGKILL');
  const ev = await nextEvent(ch, 5000);
  assert.equal(ev.event, CmEventType.DISCONNECTED);
  assert.equal(ev.status, 0);
  ev.ack();
  const wcs = id.recvCq.poll(8);
  assert.deepEqual(wcs.map((w) => [w.wrId, w.status]), [[0, WcStatus.WR_FLUSH_ERR], [1, WcStatus.WR_FLUSH_ERR], [2, WcStatus.WR_FLUSH_ERR]]);
  assert.equal(id.qp.state, 'ERR');
  mr.dereg();
}

test('peer process killed (client side): the server id gets DISCONNECTED, posted receives flush', async () => {
  const sch = createEventChannel();
  const listen = createId(sch, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(0);
  const peer = startPeer('client', listen.srcPort);
  const req = await nextEvent(sch, 10_000);
  assert.equal(req.event, CmEventType.CONNECT_REQUEST);
  const child = req.id;
  req.ack();
  child.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  await child.accept();
  const est = await nextEvent(sch, 10_000);
  assert.equal(est.event, CmEventType.ESTABLISHED);
  est.ack();
  await peer.line(0);
  await expectFlushOnKill(child, sch, peer);
  await done(sch, child, listen);
});

test('peer process killed (server side): the client id gets DISCONNECTED, posted receives flush', async () => {
  const peer = startPeer('server');
  const port = Number(await peer.line(0));
  const { ch, id } = await clientTo(port);
  await id.connect();
  const est = await nextEvent(ch, 10_000);
  assert.equal(est.event, CmEventType.ESTABLISHED);
  est.ack();
  await peer.line(1);
  await expectFlushOnKill(id, ch, peer);
  await done(ch, id);
});

test('rdma_destroy_id drops events not yet retrieved and waits only for the reported ones', async () => {
  const ch = createEventChannel();
  const a = createId(ch, 'a', PortSpace.TCP);
  const b = createId(ch, 'b', PortSpace.TCP);
  await a.resolveAddr(null, { address: '127.0.0.1', port: 1 });
  await b.resolveAddr(null, { address: '127.0.0.1', port: 1 });
  await new Promise((r) => setTimeout(r, 30));
  assert.equal(ch.pending, 2);
  // a's event is queued, never retrieved: destroy does not wait for it (the kernel drops it).
  await a.destroy();
  assert.equal(ch.pending, 1);
  const ev = await nextEvent(ch);
  assert.equal(ev.id, b, 'only b is left');
  let finished = false;
  const p = b.destroy().then(() => (finished = true));
  await new Promise((r) => setTimeout(r, 30));
  assert.equal(finished, false, 'b waits for the event it reported');
  ev.ack();
  await p;
  ch.destroy();
});

test('rdma_migrate_id waits until the events reported on the old channel are acknowledged', async () => {
  const a = createEventChannel();
  const b = createEventChannel();
  const id = createId(a, null, PortSpace.TCP);
  await id.resolveAddr(null, { address: '127.0.0.1', port: 1 });
  const ev = await nextEvent(a);
  let moved = false;
  const p = id.migrate(b).then(() => (moved = true));
  await new Promise((r) => setTimeout(r, 30));
  assert.equal(moved, false);
  ev.ack();
  await p;
  await id.resolveRoute();
  const r = await nextEvent(b);
  assert.equal(r.event, CmEventType.ROUTE_RESOLVED);
  r.ack();
  await assert.rejects(id.migrate(null).then(() => id.migrate(null)), { code: 'EINVAL' }, 'already synchronous');
  await id.destroy();
  a.destroy();
  b.destroy();
});

test('destroying a listener with connect requests queued rejects them (the peers get REJECTED)', async () => {
  const sch = createEventChannel();
  const listen = createId(sch, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(0);
  const c1 = await clientTo(listen.srcPort);
  const c2 = await clientTo(listen.srcPort);
  await c1.id.connect();
  await c2.id.connect();
  while (sch.pending < 2) await new Promise((r) => setTimeout(r, 5));
  await listen.destroy();
  assert.equal(sch.pending, 0, 'the queued requests went with the listener');
  for (const c of [c1, c2]) {
    const ev = await nextEvent(c.ch);
    assert.equal(ev.event, CmEventType.REJECTED);
    ev.ack();
    await done(c.ch, c.id);
  }
  sch.destroy();
});

test('iWARP has no TIMEWAIT_EXIT: after DISCONNECTED nothing more is reported', async () => {
  const sch = createEventChannel();
  const listen = createId(sch, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(0);
  const { ch, id } = await clientTo(listen.srcPort);
  await id.connect();
  const req = await nextEvent(sch);
  const child = req.id;
  req.ack();
  child.createQp(null, {});
  await child.accept();
  const order = { client: [], server: [] };
  for (let i = 0; i < 1; i++) {
    const e = await nextEvent(ch);
    order.client.push(e.event);
    e.ack();
    const s = await nextEvent(sch);
    order.server.push(s.event);
    s.ack();
  }
  await id.disconnect();
  for (const [c, k] of [[ch, 'client'], [sch, 'server']]) {
    const e = await nextEvent(c);
    order[k].push(e.event);
    e.ack();
  }
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(ch.pending + sch.pending, 0, 'no TIMEWAIT_EXIT (the kernel delivers it from the IB CM only)');
  assert.deepEqual(order.client, [CmEventType.ESTABLISHED, CmEventType.DISCONNECTED]);
  assert.deepEqual(order.server, [CmEventType.ESTABLISHED, CmEventType.DISCONNECTED]);
  await done(ch, id);
  await done(sch, child, listen);
});
