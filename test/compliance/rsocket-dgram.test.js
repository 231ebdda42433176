// Datagram rsockets (SOCK_DGRAM, rsocket.c's ds_* protocol over UD QPs) on every device: between
// two sockets on a device with UD QPs, datagrams arrive whole, in order on loopback, with the
// sender's address; the first ones go through the peer's UDP service and later ones over UD;
// rrecvfrom/rrecvmsg/MSG_PEEK/rpoll/options behave as rsocket.c's; on a device without UD QPs
// (siw) the first send to an address fails as rdma-core's does there (EOPNOTSUPP).
import test, { describe } from 'node:test';
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import * as rs from '../../dist/rsocket/index.js';
import { forEachDevice, testDevices, Cap } from '../lib/devices.js';
import { until } from '../lib/wait.js';

const { DsSocket, RS_EAGAIN, POLLIN, POLLOUT, MSG_PEEK, SOL_SOCKET, SO_RCVBUF, SO_SNDBUF, SOL_RDMA, RDMA_SQSIZE } = rs;
const T = { timeout: 30_000 };
const LO = '127.0.0.1';

/** A port no one uses now (a UDP socket's, closed). */
async function freeUdpPort() {
  const s = createSocket('udp4');
  s.bind(0, LO);
  await once(s, 'listening');
  const { port } = s.address();
  s.close();
  return port;
}

/** Wait for the next datagram of `s` (rpoll, then rrecvfrom). */
async function next(s, size = 4096, ms = 5000) {
  const r = await s.poll(POLLIN, ms);
  assert.equal(r & POLLIN, POLLIN, 'a datagram within the deadline');
  const buf = Buffer.alloc(size);
  const d = s.recvfrom(buf);
  assert.notEqual(d, RS_EAGAIN);
  return { ...d, data: buf.subarray(0, d.n) };
}

async function pair() {
  const port = await freeUdpPort();
  const a = new DsSocket(4);
  await a.bind({ address: LO, port });
  const b = new DsSocket(4);
  await b.connect({ address: LO, port });
  return { a, b, port };
}

forEachDevice([Cap.UD, Cap.AH], () => {
  test('datagrams both ways, whole, with the sender\'s address; the first through the UDP service, then UD', T, async () => {
    const { a, b, port } = await pair();
    try {
      const bPort = b.localAddress.port;
      for (let i = 0; i < 20; i++) {
        const msg = Buffer.from(`ping ${i} `.repeat(i + 1));
        assert.equal(await b.send(msg), msg.length);
        const d = await next(a);
        assert.deepEqual(d.data, msg);
        assert.equal(d.size, msg.length);
        assert.equal(d.from.address, LO);
        assert.equal(d.from.port, bPort);
        const reply = Buffer.from(`pong ${i}`);
        assert.equal(await a.sendto(reply, d.from), reply.length);
        const e = await next(b);
        assert.deepEqual(e.data, reply);
        assert.deepEqual([e.from.address, e.from.port], [LO, port]);
      }
      assert.equal(a.qpCount, 1);
      assert.equal(b.qpCount, 1);
      // Once the peer's QP is known the UDP socket carries nothing more: the service has an
      // address handle for b, and b has one for a.
      assert.ok(b.remoteAddress);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('a datagram longer than the buffer is cut (the rest lost); MSG_PEEK leaves it queued', T, async () => {
    const { a, b } = await pair();
    try {
      await b.send(Buffer.from('0123456789'));
      await b.send(Buffer.from('second'));
      assert.equal((await a.poll(POLLIN, 5000)) & POLLIN, POLLIN);
      const small = Buffer.alloc(4);
      const p = a.recvfrom(small, MSG_PEEK);
      assert.equal(p.n, 4);
      assert.equal(p.size, 10);
      const r = a.recvfrom(small);
      assert.deepEqual([r.n, small.toString()], [4, '0123']);
      const d = await next(a);
      assert.equal(d.data.toString(), 'second');
      assert.equal(a.recvfrom(Buffer.alloc(8)), RS_EAGAIN);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('rsendmsg joins the vectors into one datagram; rrecvmsg scatters it and names the sender', T, async () => {
    const { a, b } = await pair();
    try {
      assert.equal(await b.sendmsg({ iov: [Buffer.from('abc'), Buffer.from('defg'), Buffer.from('h')] }), 8);
      assert.equal((await a.poll(POLLIN, 5000)) & POLLIN, POLLIN);
      const v = [Buffer.alloc(2), Buffer.alloc(5), Buffer.alloc(4)];
      const r = a.recvmsg({ iov: v });
      assert.equal(r.n, 8);
      assert.equal(Buffer.concat(v).subarray(0, 8).toString(), 'abcdefgh');
      assert.equal(r.name.port, b.localAddress.port);
      await assert.rejects(b.sendmsg({ iov: [Buffer.from('x')], control: Buffer.alloc(4) }), { code: 'EOPNOTSUPP' });
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('EMSGSIZE beyond one 2 KiB slot; EDESTADDRREQ without a destination; EINVAL reading an unused socket', T, async () => {
    const { a, b } = await pair();
    const c = new DsSocket(4);
    try {
      // Over UDP (the first datagram), the peer's service reads 2 KiB: 2032 bytes after the header.
      assert.equal(await b.send(Buffer.alloc(2040, 1)), 2040);
      assert.equal((await next(a)).size, 2032);
      await until(() => b.sendsOverUd(b.remoteAddress), 5000, 'b learns a\'s QP');
      assert.equal(await b.send(Buffer.alloc(2040, 2)), 2040);
      await assert.rejects(b.send(Buffer.alloc(2041)), { code: 'EMSGSIZE' });
      const d = await next(a);
      assert.equal(d.size, 2040);
      assert.ok(d.data.every((x) => x === 2));
      assert.throws(() => c.recvfrom(Buffer.alloc(4)), { code: 'EINVAL' });
      await c.bind({ address: LO, port: 0 });
      await assert.rejects(c.send(Buffer.from('x')), { code: 'EDESTADDRREQ' });
    } finally {
      await Promise.all([a.close(), b.close(), c.close()]);
    }
  });

  test('rpoll: POLLOUT while a send slot is free, POLLIN only with a datagram; options as rsocket.c keeps them', T, async () => {
    const s = new DsSocket(4);
    try {
      s.setsockopt(SOL_SOCKET, SO_RCVBUF, 1 << 19);
      s.setsockopt(SOL_SOCKET, SO_SNDBUF, 100);
      s.setsockopt(SOL_RDMA, RDMA_SQSIZE, 8);
      assert.equal(s.getsockopt(SOL_SOCKET, SO_RCVBUF), 1 << 20);
      assert.equal(s.getsockopt(SOL_SOCKET, SO_SNDBUF), 4096);
      await s.bind({ address: LO, port: 0 });
      // ds_set_qp_size: the queues fit the buffers (2 KiB a slot), and the buffers the queues.
      assert.equal(s.getsockopt(SOL_RDMA, RDMA_SQSIZE), 2);
      assert.equal(s.getsockopt(SOL_SOCKET, SO_SNDBUF), 4096);
      assert.equal(s.getsockopt(SOL_SOCKET, SO_RCVBUF), 384 * 2048);
      assert.throws(() => s.setsockopt(SOL_RDMA, RDMA_SQSIZE, 16), { code: 'EINVAL' });
      assert.equal(await s.poll(POLLIN | POLLOUT, 0), POLLOUT);
      // What a Linux UDP socket refuses, refused first (rsocket.c sets it on its UDP socket).
      assert.throws(() => s.setsockopt(rs.IPPROTO_TCP, rs.TCP_NODELAY, 1), { code: 'ENOPROTOOPT' });
      assert.throws(() => s.setsockopt(SOL_SOCKET, 99, 1), { code: 'ENOPROTOOPT' });
      assert.throws(() => s.setsockopt(rs.IPPROTO_IPV6, rs.IPV6_V6ONLY, 1), { code: 'ENOPROTOOPT' });
      s.setsockopt(SOL_SOCKET, rs.SO_BROADCAST, 1);
      assert.equal(s.getsockopt(SOL_SOCKET, rs.SO_BROADCAST), 1);
      assert.equal(s.getsockopt(SOL_SOCKET, rs.SO_ERROR), 0);
      assert.equal(await s.poll(POLLIN, 50), 0);
    } finally {
      await s.close();
    }
  });

  test('IPv6: both ways on ::1 (24-byte headers), then over UD', T, async () => {
    const port = await freeUdpPort();
    const a = new DsSocket(6);
    const b = new DsSocket(6);
    try {
      await a.bind({ address: '::1', port });
      await b.connect({ address: '::1', port });
      for (let i = 0; i < 3; i++) {
        assert.equal(await b.send(Buffer.from(`v6 ${i}`)), 4);
        const d = await next(a);
        assert.equal(d.data.toString(), `v6 ${i}`);
        assert.deepEqual([d.from.address, d.from.port, d.from.family], ['::1', b.localAddress.port, 'IPv6']);
        assert.equal(await a.sendto(Buffer.from('back'), d.from), 4);
        const e = await next(b);
        assert.deepEqual([e.data.toString(), e.from.address, e.from.port], ['back', '::1', port]);
      }
      await until(() => b.sendsOverUd(b.remoteAddress), 5000, 'b learns a\'s QP');
      assert.equal(await b.send(Buffer.alloc(2024, 7)), 2024);
      await assert.rejects(b.send(Buffer.alloc(2025)), { code: 'EMSGSIZE' });
      assert.equal((await next(a)).size, 2024);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('a socket bound to the wildcard sends from the address that reaches the peer', T, async () => {
    const port = await freeUdpPort();
    const a = new DsSocket(4);
    const b = new DsSocket(4);
    try {
      await a.bind({ address: '0.0.0.0', port });
      await b.bind({ address: '0.0.0.0', port: 0 });
      assert.equal(await b.sendto(Buffer.from('hi'), { address: LO, port }), 2);
      const d = await next(a);
      assert.equal(d.data.toString(), 'hi');
      assert.deepEqual([d.from.address, d.from.port], [LO, b.localAddress.port]);
      assert.equal(await a.sendto(Buffer.from('back'), d.from), 4);
      assert.equal((await next(b)).data.toString(), 'back');
    } finally {
      await a.close();
      await b.close();
    }
  });
}, 'datagram rsockets');

describe('datagram rsockets on a device without UD QPs', () => {
  const devs = testDevices().filter((d) => !d.caps.has(Cap.UD));
  for (const d of devs) {
    test(`[${d.name}] rconnect fails as rdma-core's on siw (EOPNOTSUPP), and the socket closes`, T, async () => {
      const saved = process.env.RDMACM_DEVICE;
      process.env.RDMACM_DEVICE = d.name;
      const s = new DsSocket(4);
      try {
        await assert.rejects(s.connect({ address: LO, port: await freeUdpPort() }), (e) => {
          assert.equal(e.code, 'EOPNOTSUPP', e.message);
          assert.equal(e.op, 'rconnect');
          return true;
        });
        assert.equal(s.qpCount, 0);
      } finally {
        await s.close();
        if (saved === undefined) delete process.env.RDMACM_DEVICE;
        else process.env.RDMACM_DEVICE = saved;
      }
    });
  }
  if (devs.length === 0) test('no device without UD QPs', { skip: true }, () => {});
});
