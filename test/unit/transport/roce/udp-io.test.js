// The soft RoCE device's UDP endpoints (udp-endpoint.ts, udp-mmsg.ts, native/src/udpio.c): the
// addon's batched socket sends and receives many datagrams per system call and per call into
// JavaScript without losing, repeating or reordering any; a short sendmmsg resumes at the first
// datagram not sent; a datagram the kernel refuses is skipped and counted; on EAGAIN the rest is
// kept (copied) and sent once the socket is writable; close sends what was queued; a process
// exits by itself after closing, and loses nothing queued when it calls process.exit(). The
// dgram endpoint passes the same exchange. Skipped (with the reason) where the addon is not built.
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { until } from '../../../lib/wait.js';
import { freePort } from '../../../lib/ports.js';

const { MmsgEndpoint, mmsgAvailable } = await import('../../../../dist/transport/roce/udp-mmsg.js');
const { DgramEndpoint, roceIoKind } = await import('../../../../dist/transport/roce/udp-endpoint.js');
const { netopt } = await import('../../../../dist/util/netopt.js');

const noAddon = mmsgAvailable() ? false : 'the netopt addon with batched UDP sockets is not built';
const C = netopt()?.udpConst ?? {};
const EINVAL = 22;

/** Endpoints the current test opened: closed after it whatever its outcome (an open one holds the process). */
const open = new Set();

/** An endpoint of `Kind` on 127.0.0.1:`port` that records what it receives. */
function endpoint(Kind, port, opts = {}) {
  const got = [];
  const errors = [];
  const ep = Kind.open(
    { family: 4, bindIp: '127.0.0.1', port, bufSize: 4 << 20, onDatagram: (msg, src, srcPort) => got.push({ msg: Buffer.from(msg), src, srcPort }), onError: (e) => errors.push(e), ...opts },
    true,
  );
  open.add(ep);
  return { ep, got, errors };
}

afterEach(() => {
  for (const ep of open) ep.close();
  open.clear();
});

/** `n` datagrams of different lengths, each starting with its index. */
function datagrams(n, len = (i) => 64 + ((i * 97) % 4000)) {
  return Array.from({ length: n }, (_, i) => {
    const b = Buffer.alloc(len(i), i & 0xff);
    b.writeUInt32BE(i, 0);
    return b;
  });
}

const stats = (ep) => netopt().udpStats(ep.handle);
const close = (...eps) => eps.forEach((e) => e.ep.close());

for (const [name, Kind, skip] of [
  ['mmsg', MmsgEndpoint, noAddon],
  ['dgram', DgramEndpoint, false],
]) {
  test(`${name}: a burst of 300 datagrams arrives whole, once each, in order, with its source`, { skip, timeout: 20000 }, async () => {
    const pa = await freePort('udp4');
    const pb = await freePort('udp4');
    const a = endpoint(Kind, pa);
    const b = endpoint(Kind, pb);
    const out = datagrams(300);
    for (const d of out) a.ep.send(d, d.length, '127.0.0.1', pb);
    await until(() => b.got.length >= 300, 10000, 'all 300 datagrams');
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(b.got.length, 300);
    b.got.forEach((g, i) => {
      assert.ok(g.msg.equals(out[i]), `datagram ${i} intact and in order`);
      assert.equal(g.src, '127.0.0.1');
      assert.equal(g.srcPort, pa);
    });
    if (name === 'mmsg') {
      const sa = stats(a.ep);
      const sb = stats(b.ep);
      assert.equal(sa[C.ST_TX_DGRAMS], 300);
      assert.ok(sa[C.ST_TX_CALLS] <= 300 / C.BATCH + 2, `sendmmsg calls ${sa[C.ST_TX_CALLS]} for 300 datagrams`);
      assert.equal(sb[C.ST_RX_DGRAMS], 300);
      assert.ok(sb[C.ST_RX_CALLS] < 300, `one call into JavaScript per batch (${sb[C.ST_RX_CALLS]} for 300)`);
    }
    assert.deepEqual([a.errors, b.errors], [[], []]);
    close(a, b);
  });
}

test('mmsg: a MAD (QPN 1) the receiver keeps stays intact after later rounds; other datagrams are whole while their call runs', { skip: noAddon, timeout: 20000 }, async () => {
  const pa = await freePort('udp4');
  const pb = await freePort('udp4');
  const a = endpoint(MmsgEndpoint, pa);
  // The receiver keeps what it is handed, without a copy of its own: a MAD the connection manager
  // holds on to must survive the rounds after it.
  const kept = [];
  const seen = [];
  const b = endpoint(MmsgEndpoint, pb, { onDatagram: (msg) => (kept.push(msg), seen.push(Buffer.from(msg))) });
  // A BTH with destination QPN 1 (bytes 5-7), then a body of 0x11.
  const mad = Buffer.alloc(300, 0x11);
  mad.fill(0, 0, 12);
  mad[7] = 1;
  a.ep.send(mad, mad.length, '127.0.0.1', pb);
  await until(() => kept.length >= 1, 10000, 'the MAD');
  // Later rounds: datagrams for QPN 0x000100 of the same length and another content.
  const later = Array.from({ length: 200 }, () => {
    const d = Buffer.alloc(300, 0xee);
    d.fill(0, 0, 12);
    d[6] = 1;
    return d;
  });
  for (const d of later) a.ep.send(d, d.length, '127.0.0.1', pb);
  await until(() => kept.length >= 201, 10000, 'the later datagrams');
  assert.ok(kept[0].equals(mad), 'the MAD kept from its round is unchanged');
  seen.slice(1).forEach((d, i) => assert.ok(d.equals(later[i]), `datagram ${i} whole during its call`));
  assert.deepEqual([a.errors, b.errors], [[], []]);
  close(a, b);
});

test('mmsg: a short sendmmsg resumes at the first datagram not sent', { skip: noAddon, timeout: 20000 }, async () => {
  const pa = await freePort('udp4');
  const pb = await freePort('udp4');
  const a = endpoint(MmsgEndpoint, pa);
  const b = endpoint(MmsgEndpoint, pb);
  netopt().udpFault(a.ep.handle, 7, -1); // the kernel takes 7 of each batch
  const out = datagrams(40);
  for (const d of out) a.ep.send(d, d.length, '127.0.0.1', pb);
  await until(() => b.got.length >= 40, 10000, '40 datagrams');
  assert.deepEqual(
    b.got.map((g) => g.msg.readUInt32BE(0)),
    out.map((_, i) => i),
  );
  const s = stats(a.ep);
  assert.equal(s[C.ST_TX_DGRAMS], 40);
  assert.ok(s[C.ST_TX_SHORT] >= 5, `short sends counted (${s[C.ST_TX_SHORT]})`);
  close(a, b);
});

test('mmsg: a datagram the kernel refuses mid-batch (EINVAL: port 0) is skipped and counted; the rest of the batch goes', { skip: noAddon, timeout: 20000 }, async () => {
  const pa = await freePort('udp4');
  const pb = await freePort('udp4');
  const a = endpoint(MmsgEndpoint, pa);
  const b = endpoint(MmsgEndpoint, pb);
  const out = datagrams(7);
  // UDP refuses destination port 0 before routing (EINVAL), so nothing leaves the host.
  for (let i = 0; i < 7; i++) a.ep.send(out[i], out[i].length, '127.0.0.1', i === 3 ? 0 : pb);
  await until(() => b.got.length >= 6, 10000, '6 datagrams');
  await new Promise((r) => setTimeout(r, 50));
  const s = stats(a.ep);
  assert.deepEqual(
    b.got.map((g) => g.msg.readUInt32BE(0)),
    [0, 1, 2, 4, 5, 6],
  );
  assert.equal(s[C.ST_TX_ERRORS], 1);
  assert.equal(s[C.ST_TX_LAST_ERRNO], EINVAL);
  assert.equal(s[C.ST_TX_DGRAMS], 6);
  close(a, b);
});

test('mmsg: EAGAIN keeps the rest (copied: the caller may reuse its buffers) and sends it once the socket is writable', { skip: noAddon, timeout: 20000 }, async () => {
  const pa = await freePort('udp4');
  const pb = await freePort('udp4');
  const a = endpoint(MmsgEndpoint, pa);
  const b = endpoint(MmsgEndpoint, pb);
  netopt().udpFault(a.ep.handle, 0, 5); // the call after 5 datagrams fails with EAGAIN
  const out = datagrams(20);
  const want = out.map((d) => Buffer.from(d));
  for (const d of out) a.ep.send(d, d.length, '127.0.0.1', pb);
  await Promise.resolve(); // the flush runs in a microtask
  await Promise.resolve();
  const s = stats(a.ep);
  assert.equal(s[C.ST_TX_EAGAIN], 1);
  assert.equal(s[C.ST_TX_QUEUED], 15, 'the 15 datagrams after the EAGAIN wait');
  assert.equal(a.ep.unsent(), true);
  for (const d of out) d.fill(0xee); // the caller's buffers are no longer read
  // A datagram sent while the queue waits is queued behind it.
  const late = datagrams(21)[20];
  want.push(Buffer.from(late));
  a.ep.send(late, late.length, '127.0.0.1', pb);
  late.fill(0xee);
  await until(() => b.got.length >= 21, 10000, '21 datagrams');
  b.got.forEach((g, i) => assert.ok(g.msg.equals(want[i]), `datagram ${i} intact`));
  assert.equal(a.ep.unsent(), false);
  close(a, b);
});

test('mmsg: close sends what was queued in the current task; the endpoint refuses use afterwards', { skip: noAddon, timeout: 20000 }, async () => {
  const pa = await freePort('udp4');
  const pb = await freePort('udp4');
  const a = endpoint(MmsgEndpoint, pa);
  const b = endpoint(MmsgEndpoint, pb);
  const out = datagrams(50);
  for (const d of out) a.ep.send(d, d.length, '127.0.0.1', pb);
  a.ep.close();
  assert.equal(a.ep.bound, false);
  a.ep.send(out[0], out[0].length, '127.0.0.1', pb); // ignored: closed
  await until(() => b.got.length >= 50, 10000, '50 datagrams');
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(b.got.length, 50);
  close(b);
});

test('mmsg and dgram endpoints share an address and port (SO_REUSEADDR on both), as processes of either path must', { skip: noAddon, timeout: 20000 }, async () => {
  const p = await freePort('udp4');
  const a = endpoint(MmsgEndpoint, p);
  const d = endpoint(DgramEndpoint, p);
  assert.equal(a.ep.bound, true);
  assert.equal(d.ep.bound, true);
  close(a, d);
});

const CHILD = fileURLToPath(new URL('./udp-io-child.js', import.meta.url));

test('mmsg: a process exits by itself once its endpoints are closed, loses nothing queued when it calls process.exit(), and a worker may end with endpoints open', { skip: noAddon, timeout: 30000 }, async () => {
  const pb = await freePort('udp4');
  const b = endpoint(MmsgEndpoint, pb);
  for (const mode of ['close', 'exit', 'unref', 'worker']) {
    const before = b.got.length;
    const r = spawnSync(process.execPath, [CHILD, mode, String(pb)], { encoding: 'utf8', timeout: 10000 });
    assert.equal(r.status, 0, `${mode}: ${r.stderr}${r.error ?? ''}`);
    await until(() => b.got.length >= before + 10, 5000, `${mode}: 10 datagrams`);
  }
  close(b);
});

test('RDMACM_ROCE_IO chooses the path (dgram always; mmsg where the addon has it); without the addon, dgram', () => {
  const want = process.env.RDMACM_ROCE_IO === 'dgram' || noAddon ? 'dgram' : 'mmsg';
  assert.equal(roceIoKind(), want);
  for (const io of ['dgram', 'mmsg']) {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', `const { roce } = await import(${JSON.stringify(new URL('../../../../dist/index.js', import.meta.url).href)}); console.log(roce.ioPath());`], {
      env: { ...process.env, RDMACM_ROCE_IO: io },
      encoding: 'utf8',
    });
    assert.equal(r.stdout.trim(), io === 'mmsg' && noAddon ? 'dgram' : io);
  }
  const absent = spawnSync(process.execPath, ['--input-type=module', '-e', `const { roce } = await import(${JSON.stringify(new URL('../../../../dist/index.js', import.meta.url).href)}); console.log(roce.ioPath());`], {
    env: { ...process.env, RDMACM_ROCE_IO: 'mmsg', RDMACM_NETOPT_PATH: '/nonexistent/netopt.node' },
    encoding: 'utf8',
  });
  assert.equal(absent.stdout.trim(), 'dgram', absent.stderr);
});
