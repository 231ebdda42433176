// The pingpong examples' side-channel message (src/cli/pingpong-wire.ts) against the bytes
// rdma-core's tools send, and getopt_long's long options as the tools take them.
import test from 'node:test';
import assert from 'node:assert/strict';
import { PP_MSG_LEN, decodeDest, encodeDest, gidToWire, wireToGid, ppMtuToEnum, gidHasInterfaceId } from '../../../dist/cli/pingpong-wire.js';
import { expandLongOptions } from '../../../dist/cli/getopt.js';

// What rdma-core 44's ibv_rc_pingpong on rxe0 sent for QPN 0x11, PSN 0x8a3120, GID ::ffff:10.77.0.2
const KERNEL_MSG = Buffer.concat([Buffer.from('0000:000011:8a3120:00000000000000000000ffff0a4d0002', 'latin1'), Buffer.alloc(1)]);

test('encodeDest: "%04x:%06x:%06x:%s" with its NUL, 52 bytes, as rdma-core\'s', () => {
  assert.equal(KERNEL_MSG.length, PP_MSG_LEN);
  const gid = Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 2]);
  assert.deepEqual(encodeDest({ lid: 0, qpn: 0x11, psn: 0x8a3120, gid }), KERNEL_MSG);
  assert.deepEqual(decodeDest(KERNEL_MSG), { lid: 0, qpn: 0x11, psn: 0x8a3120, gid });
  assert.equal(gidToWire(gid), '00000000000000000000ffff0a4d0002');
  assert.deepEqual(wireToGid('00000000000000000000FFFF0A4D0002'), gid);
  assert.equal(wireToGid('00000000000000000000ffff0a4d000'), null);
});

test('decodeDest: fields beyond their widths, missing fields, non-hex text and empty messages are refused', () => {
  const g = '0'.repeat(32);
  for (const bad of [`10000:000001:000001:${g}`, `0000:1000000:000001:${g}`, `0000:000001:1000000:${g}`, `0000:000001:000001`, `0000:00000g:000001:${g}`, `0000:000001:000001:${g}0`, '', `:000001:000001:${g}`]) {
    assert.equal(decodeDest(Buffer.from(`${bad}\0`, 'latin1')), null, bad);
  }
  assert.deepEqual(decodeDest(Buffer.from(`ffff:ffffff:ffffff:${'f'.repeat(32)}`)), { lid: 0xffff, qpn: 0xffffff, psn: 0xffffff, gid: new Uint8Array(16).fill(0xff) });
});

test('ppMtuToEnum and the GRH rule', () => {
  assert.deepEqual([256, 512, 1024, 2048, 4096, 100, 0].map(ppMtuToEnum), [1, 2, 3, 4, 5, 0, 0]);
  assert.equal(gidHasInterfaceId(new Uint8Array(16)), false);
  assert.equal(gidHasInterfaceId(Uint8Array.from([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])), true);
  assert.equal(gidHasInterfaceId(Uint8Array.from([0x52, 0x54, 0, 0x77, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])), false, "siw's GID: the MAC, no interface id");
});

test('expandLongOptions: --name=value, --name value, prefixes, flags; glibc\'s messages for the bad ones', () => {
  const table = [
    { name: 'port', hasArg: true, val: 'p' },
    { name: 'ib-dev', hasArg: true, val: 'd' },
    { name: 'ib-port', hasArg: true, val: 'i' },
    { name: 'events', hasArg: false, val: 'e' },
  ];
  const errs = [];
  const write = process.stderr.write;
  process.stderr.write = (s) => (errs.push(String(s)), true);
  try {
    assert.deepEqual(expandLongOptions('t', ['--port=7', '--ib-dev', 'x', '--ev', 'host', '--', '--port'], table), { args: ['-p', '7', '-d', 'x', '-e', 'host', '--', '--port'], error: false });
    assert.equal(expandLongOptions('t', ['--ib', '1'], table).error, true);
    assert.equal(expandLongOptions('t', ['--nope'], table).error, true);
    assert.equal(expandLongOptions('t', ['--events=1'], table).error, true);
    assert.equal(expandLongOptions('t', ['--port'], table).error, true);
  } finally {
    process.stderr.write = write;
  }
  assert.deepEqual(errs, [
    "t: option '--ib' is ambiguous; possibilities: '--ib-dev' '--ib-port'\n",
    "t: unrecognized option '--nope'\n",
    "t: option '--events' doesn't allow an argument\n",
    "t: option '--port' requires an argument\n",
  ]);
});
