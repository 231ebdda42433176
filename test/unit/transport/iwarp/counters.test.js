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

test('IwarpCounters: counts carry past 2^30, 2^31 and 2^32 exactly (octet counts of long runs)', async () => {
  const { IwarpCounters, IC } = await import('../../../../dist/transport/iwarp/counters.js');
  const c = new IwarpCounters();
  c.add(IC.mpaOutOctets, 2 ** 30 - 3);
  c.add(IC.mpaOutOctets, 2);
  assert.equal(c.value(IC.mpaOutOctets), 2 ** 30 - 1);
  c.add(IC.mpaOutOctets, 5);
  assert.equal(c.value(IC.mpaOutOctets), 2 ** 30 + 4);
  let want = 2 ** 30 + 4;
  for (let i = 0; i < 7; i++) {
    c.add(IC.mpaOutOctets, 2 ** 31 - 1);
    want += 2 ** 31 - 1;
    assert.equal(c.value(IC.mpaOutOctets), want);
  }
  assert.ok(want > 2 ** 33);
  // Many small counts across the boundaries, as the data path makes them.
  const d = new IwarpCounters();
  let total = 0;
  for (let i = 0; i < 3000; i++) {
    const n = 1 + ((i * 7919) % 1_500_000);
    d.add(IC.mpaInOctets, n);
    total += n;
  }
  for (let i = 0; i < 5; i++) {
    d.add(IC.mpaInOctets, 2 ** 31 - 7);
    total += 2 ** 31 - 7;
  }
  assert.equal(d.snapshot().mpaInOctets, total);
  d.add(IC.iwOutRdmaSends);
  assert.equal(d.snapshot().iwOutRdmaSends, 1);
  assert.equal(d.snapshot().mpaOutOctets, 0);
});

test('IwarpCounters: code optimised while counts are small stays in use once an octet count passes 2^31 and 2^32 (V8)', { timeout: 60_000 }, async () => {
  const { spawnSync } = await import('node:child_process');
  const mod = new URL('../../../../dist/transport/iwarp/counters.js', import.meta.url).href;
  const src = `
    const { IwarpCounters, IC } = await import(${JSON.stringify(mod)});
    const c = new IwarpCounters();
    function count(n) { c.add(IC.mpaOutOctets, n); c.add(IC.mpaOutFpdus); }
    %PrepareFunctionForOptimization(count);
    for (let i = 0; i < 100; i++) count(1448);
    %OptimizeFunctionOnNextCall(count);
    count(1448);
    // Code thrown away now stays thrown away (no later recompilation hides it).
    %NeverOptimizeFunction(count);
    const before = (%GetOptimizationStatus(count) & 16) !== 0;
    const n = Math.ceil(2 ** 33 / 262144);
    for (let i = 0; i < n; i++) count(262144);
    const after = (%GetOptimizationStatus(count) & 16) !== 0;
    const s = c.snapshot();
    console.log(JSON.stringify([before, after, s.mpaOutOctets === 101 * 1448 + n * 262144, s.mpaOutFpdus === 101 + n, s.mpaOutOctets > 2 ** 33]));`;
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', src], { encoding: 'utf8', timeout: 50_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout.trim()), [true, true, true, true, true]);
});
