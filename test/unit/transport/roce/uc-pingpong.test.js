// test/lib/uc-pingpong.js (ibv_uc_pingpong over this package, the interop suite's peer of the C
// tool) against itself on rxe_lo: the address exchange, UC QPs connected from it, the ping-pong
// of SENDs to the end, the C tool's output lines; and its wire formats against the C tool's.
import test from 'node:test';
import assert from 'node:assert/strict';
import { loDevice, v4GidIndex } from '../../../lib/roce.js';
import { ucPingpong, parseArgs, destMsg, parseDest, gidToWire } from '../../../lib/uc-pingpong.js';
import { freePort } from '../../../lib/ports.js';

test('the exchange message is the C tool\'s: %04x:%06x:%06x:<32 hex digits> and a NUL, 52 bytes', () => {
  const gid = Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 2]);
  const m = destMsg({ lid: 0, qpn: 0x11, psn: 0xabcdef, gid });
  assert.equal(m.length, 52);
  assert.equal(m.toString('latin1'), '0000:000011:abcdef:00000000000000000000ffff0a4d0002\0');
  assert.deepEqual(parseDest(m), { lid: 0, qpn: 0x11, psn: 0xabcdef, gid });
  assert.equal(gidToWire(gid), '00000000000000000000ffff0a4d0002');
  assert.deepEqual(parseArgs(['-g', '1', '-n', '5', 'host']), { port: 18515, dev: null, ibPort: 1, size: 4096, mtu: 1024, rxDepth: 500, iters: 5, gidx: 1, gidIp: null, server: 'host' });
});

test('our ibv_uc_pingpong against itself on rxe_lo: 300 round trips of 3000 bytes (3 packets each at MTU 1024)', async () => {
  const ctx = loDevice().open();
  const gidx = v4GidIndex(ctx);
  const port = await freePort();
  const base = ['-d', 'rxe_lo', '-g', String(gidx), '-n', '300', '-s', '3000', '-p', String(port)];
  // The client finds the same GID index from the address (-G).
  const outs = { s: '', c: '' };
  let listening;
  const up = new Promise((r) => (listening = r));
  const errs = [];
  const srv = ucPingpong(parseArgs(base), { out: (x) => (outs.s += x), err: (x) => errs.push(x), onListening: listening });
  await up;
  const cliArgs = ['-d', 'rxe_lo', '-G', '127.0.0.1', ...base.slice(4), '127.0.0.1'];
  const cli = ucPingpong(parseArgs(cliArgs), { out: (x) => (outs.c += x), err: (x) => errs.push(x) });
  const [rs, rc] = await Promise.all([srv, cli]);
  assert.deepEqual(errs, []);
  assert.equal(rs, 0);
  assert.equal(rc, 0);
  for (const o of [outs.s, outs.c]) {
    const l = o.split('\n');
    assert.match(l[0], /^ {2}local address: {2}LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::ffff:127\.0\.0\.1$/);
    assert.match(l[1], /^ {2}remote address: LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::ffff:127\.0\.0\.1$/);
    assert.match(l[2], /^1800000 bytes in \d+\.\d\d seconds = \d+\.\d\d Mbit\/sec$/);
    assert.match(l[3], /^300 iters in \d+\.\d\d seconds = \d+\.\d\d usec\/iter$/);
  }
  // Each side's remote address is the other's local one.
  const qpn = (o, what) => o.match(new RegExp(`${what} address: +LID 0x0000, QPN (0x[0-9a-f]{6}), PSN (0x[0-9a-f]{6})`)).slice(1).join();
  assert.equal(qpn(outs.s, 'remote'), qpn(outs.c, 'local'));
  assert.equal(qpn(outs.c, 'remote'), qpn(outs.s, 'local'));
});
