// The soft iWARP device's counters against a raw peer (hand-built MPA frames and FPDUs): a
// corrupted FPDU counts a CRC error, an LLP error and the TERMINATE sent; a TERMINATE received is
// counted; the per-transport reader lists exactly COUNTER_NAMES and refuses unknown devices.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { iwarp } from '../../../../dist/index.js';
import { encodeFpdu, encodeTerminate, RdmapOpcode } from '../../../../dist/wire/index.js';
import { server, teardown, rawClient, expectTerminate } from '../../../lib/raw-peer.js';
import { until } from '../../../lib/wait.js';

const DEV = 'siw_lo';

function delta(before) {
  const now = iwarp.counters(DEV);
  return Object.fromEntries(Object.keys(now).map((k) => [k, now[k] - before[k]]));
}

test('iwarp.counters: every name of COUNTER_NAMES, in order; ENODEV for a device that does not exist', () => {
  assert.deepEqual(Object.keys(iwarp.counters(DEV)), [...iwarp.COUNTER_NAMES]);
  assert.throws(() => iwarp.counters('siw_nosuch'), { code: 'ENODEV' });
});

test('a corrupted FPDU: mpaCrcErrors, llpErrors and the TERMINATE sent are counted; the good one before it is a Send received', async () => {
  const s = await server({ recvs: 2 });
  const before = iwarp.counters(DEV);
  const c = await rawClient(s.port, { crc: true });
  c.send(encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: 1, to: 0 }, undefined, { crc: true }));
  await s.ready;
  const good = encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 1 }, Buffer.from('ok'), { crc: true });
  c.send(good);
  const bad = encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 2 }, Buffer.from('no'), { crc: true });
  bad[21] ^= 0xff;
  c.send(bad);
  await expectTerminate(c, 2, 0, 0x02);
  const d = delta(before);
  assert.equal(d.mpaCrcErrors, 1);
  assert.equal(d.llpErrors, 1);
  assert.equal(d.ddpErrors + d.rdmapErrors, 0);
  assert.equal(d.iwTerminatesSent, 1);
  assert.equal(d.iwInRdmaSends, 1);
  assert.equal(d.iwInRdmaWrites, 0, 'the RTR is not a Write message');
  assert.equal(d.mpaInFpdus, 3);
  assert.equal(d.mpaInOctets, 2 * good.length + encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: 1, to: 0 }, undefined, { crc: true }).length);
  await teardown(s);
});

test('a TERMINATE from the peer is counted as received', async () => {
  const s = await server({ recvs: 1 });
  const before = iwarp.counters(DEV);
  const c = await rawClient(s.port);
  c.send(encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: 1, to: 0 }));
  await s.ready;
  c.send(encodeTerminate({ layer: 0, etype: 0, ecode: 0 }, { msn: 1 }));
  await until(() => delta(before).iwTerminatesRcvd === 1, 3000, 'TERMINATE counted');
  assert.equal(delta(before).iwTerminatesSent, 0);
  await teardown(s);
});

test('IwarpCounters: a count carries past 2^32 exactly (octet counts of long runs)', async () => {
  const { IwarpCounters, IC } = await import('../../../../dist/transport/iwarp/counters.js');
  const c = new IwarpCounters();
  c.add(IC.mpaOutOctets, 2 ** 32 - 3);
  c.add(IC.mpaOutOctets, 2);
  assert.equal(c.value(IC.mpaOutOctets), 2 ** 32 - 1);
  c.add(IC.mpaOutOctets, 5);
  assert.equal(c.value(IC.mpaOutOctets), 2 ** 32 + 4);
  for (let i = 0; i < 3; i++) c.add(IC.mpaOutOctets, 2 ** 31);
  assert.equal(c.value(IC.mpaOutOctets), 2 ** 32 + 4 + 3 * 2 ** 31);
  c.add(IC.mpaOutOctets, 2 ** 40);
  assert.equal(c.snapshot().mpaOutOctets, 2 ** 40 + 2 ** 32 + 4 + 3 * 2 ** 31);
  c.add(IC.iwOutRdmaSends);
  assert.equal(c.snapshot().iwOutRdmaSends, 1);
  assert.equal(c.snapshot().mpaInOctets, 0);
});
