// The soft RoCE device's link impairment (RDMACM_ROCE_IMPAIR): what it drops, and the CM DREQs
// it lets through when asked to spare them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT } from '../../../lib/tools.js';

const IMPAIR = join(REPO_ROOT, 'dist', 'transport', 'roce', 'impair.js');
const { configureRoceImpairment, roceImpairmentCounts, impairedSend, isCmDreq } = await import(IMPAIR);
const wire = await import(join(REPO_ROOT, 'dist', 'wire', 'roce', 'index.js'));

const ZERO = { sent: 0, dropped: 0, duplicated: 0, reordered: 0, delayed: 0, corrupted: 0, partitionDropped: 0 };
const NET = { family: 4, src: Uint8Array.of(10, 0, 0, 1), dst: Uint8Array.of(10, 0, 0, 2), sport: wire.GSI_UDP_SPORT, dport: 4791 };
const gsi = (msg) => wire.encodeGsiPacket(wire.encodeCmMad(msg, 0x1234n), NET, { psn: 7 });
const DREQ = gsi({ kind: 'DREQ', localCommId: 1, remoteCommId: 2, remoteQpn: 0x11, privateData: new Uint8Array(0) });
const DREP = gsi({ kind: 'DREP', localCommId: 2, remoteCommId: 1, privateData: new Uint8Array(0) });
const RTU = gsi({ kind: 'RTU', localCommId: 1, remoteCommId: 2, privateData: new Uint8Array(0) });
const RC_SEND = wire.encodeRocePacket({ opcode: wire.IbOpcode.RC_SEND_ONLY, destQp: 0x11, psn: 5, pkey: 0xffff, ackReq: true, payload: new Uint8Array(20) }, NET);

/** How many times each datagram went out through the impairment (synchronous sends only). */
function sendAll(pkts) {
  return pkts.map((p) => {
    let n = 0;
    assert.equal(impairedSend(p, () => n++), true);
    return n;
  });
}

test('isCmDreq: a CM DREQ on QP1, and nothing else', () => {
  assert.equal(isCmDreq(DREQ), true);
  for (const p of [DREP, RTU, RC_SEND]) assert.equal(isCmDreq(p), false);
  // The DREQ's attribute ID under another management class, on another QP, or cut short.
  const perf = Uint8Array.from(DREQ);
  perf[wire.GSI_MAD_OFF + wire.MadOff.MGMT_CLASS] = wire.MgmtClass.PERF_MGMT;
  assert.equal(isCmDreq(perf), false);
  const otherQp = Uint8Array.from(DREQ);
  wire.setBthQpn(otherQp, 0, 0x11);
  assert.equal(isCmDreq(otherQp), false);
  assert.equal(isCmDreq(DREQ.subarray(0, wire.GSI_MAD_OFF + wire.MAD_SIZE - 1)), false);
  assert.equal(isCmDreq(new Uint8Array(0)), false);
});

test('loss 1: every datagram is dropped, a DREQ too unless DREQs are spared', (t) => {
  t.after(() => configureRoceImpairment(null));
  configureRoceImpairment({ loss: 1, seed: 3 });
  assert.deepEqual(sendAll([DREQ, DREP, RTU, RC_SEND]), [0, 0, 0, 0]);
  assert.deepEqual(roceImpairmentCounts(), { ...ZERO, sent: 4, dropped: 4 });

  configureRoceImpairment({ loss: 1, dup: 1, reorder: 1, seed: 3, spareDreq: true });
  assert.deepEqual(sendAll([DREQ, DREP, RTU, RC_SEND, DREQ]), [1, 0, 0, 0, 1]);
  assert.deepEqual(roceImpairmentCounts(), { ...ZERO, sent: 5, dropped: 3 });

  configureRoceImpairment(null);
  assert.equal(impairedSend(DREQ, () => assert.fail('not configured: the caller sends')), false);
});

test('RDMACM_ROCE_IMPAIR: spare=dreq among the other keys', () => {
  const probe = `
const m = await import(${JSON.stringify(IMPAIR)});
const w = await import(${JSON.stringify(join(REPO_ROOT, 'dist', 'wire', 'roce', 'index.js'))});
const net = { family: 4, src: Uint8Array.of(10, 0, 0, 1), dst: Uint8Array.of(10, 0, 0, 2), sport: 0xc000, dport: 4791 };
const dreq = w.encodeGsiPacket(w.encodeCmMad({ kind: 'DREQ', localCommId: 1, remoteCommId: 2, remoteQpn: 0x11, privateData: new Uint8Array(0) }, 1n), net, { psn: 1 });
let n = 0;
for (let i = 0; i < 20; i++) m.impairedSend(dreq, () => n++);
process.stdout.write(JSON.stringify({ n, counts: m.roceImpairmentCounts() }));`;
  const run = (env) => {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', probe], { encoding: 'utf8', timeout: 20_000, env: { ...process.env, RDMACM_ROCE_IMPAIR: env } });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout);
  };
  assert.deepEqual(run('loss=1,seed=9,spare=dreq'), { n: 20, counts: { ...ZERO, sent: 20 } });
  assert.deepEqual(run('loss=1,seed=9'), { n: 0, counts: { ...ZERO, sent: 20, dropped: 20 } });
});

// ---- every kind of fault, the parser, the counters ------------------------------------------

const { parseRoceImpairment, corruptCopy } = await import(IMPAIR);
const { RoceCounters } = await import(join(REPO_ROOT, 'dist', 'transport', 'roce', 'counters.js'));
const { RdmaError } = await import(join(REPO_ROOT, 'dist', 'index.js'));
const sleepMs = (ms) => new Promise((r) => setTimeout(r, ms));

/** Which of `n` datagrams are dropped under `cfg` (synchronous kinds only): a string of 0/1/2 copies. */
function pattern(cfg, n = 200) {
  configureRoceImpairment(cfg);
  const out = sendAll(Array.from({ length: n }, () => RC_SEND)).join('');
  configureRoceImpairment(null);
  return out;
}

test('RDMACM_ROCE_IMPAIR text: every key, in its API name', () => {
  assert.deepEqual(
    parseRoceImpairment('loss=0.1, dup=0.2,reorder=0.3,delay=4,latency=5,jitter=6,corrupt=0.7,partition=80,partition_at=9,seed=10,spare=dreq'),
    { loss: 0.1, dup: 0.2, reorder: 0.3, delayMs: 4, latencyMs: 5, jitterMs: 6, corrupt: 0.7, partitionMs: 80, partitionAt: 9, seed: 10, spareDreq: true },
  );
  assert.deepEqual(parseRoceImpairment(''), {});
  assert.deepEqual(parseRoceImpairment('loss=0,corrupt=1,latency=0.5'), { loss: 0, corrupt: 1, latencyMs: 0.5 });
});

test('RDMACM_ROCE_IMPAIR text and configureRoceImpairment: bad input is EINVAL naming the key', () => {
  for (const [text, why] of [
    ['foo=1', /unknown key foo/],
    ['loss=1.5', /loss=1\.5: a probability above 1/],
    ['dup=-0.1', /dup=-0\.1: negative/],
    ['corrupt=x', /corrupt=x: not a number/],
    ['latency=-3', /latency=-3: negative/],
    ['jitter=', /jitter=: not a number/],
    ['partition=-1', /partition=-1: negative/],
    ['partition_at=2.5', /partition_at=2\.5: not a whole number/],
    ['seed=1.5', /seed=1\.5: not a whole number/],
    ['spare=rtu', /spare=rtu: unknown value/],
    ['loss', /loss: not key=value/],
  ]) {
    assert.throws(() => parseRoceImpairment(text), (e) => e instanceof RdmaError && e.code === 'EINVAL' && why.test(e.message), text);
  }
  for (const cfg of [{ loss: 2 }, { corrupt: -0.5 }, { latencyMs: -1 }, { jitterMs: NaN }, { partitionMs: Infinity }, { partitionAt: 1.5 }, { seed: -1 }, { spareDreq: 'yes' }, { lossy: 0.1 }, { loss: '0.1' }]) {
    assert.throws(() => configureRoceImpairment(cfg), (e) => e instanceof RdmaError && e.code === 'EINVAL' && e.op === 'configureRoceImpairment', JSON.stringify(cfg));
  }
  assert.equal(impairedSend(RC_SEND, () => {}), false, 'a refused configuration leaves the impairment off');
});

test('RDMACM_ROCE_IMPAIR with a bad value: one line on stderr and exit status 1', () => {
  for (const [env, line] of [
    ['loss=2', 'rdmacm: RDMACM_ROCE_IMPAIR: Invalid argument (loss=2: a probability above 1)\n'],
    ['loss=0.1,bogus=3', 'rdmacm: RDMACM_ROCE_IMPAIR: Invalid argument (unknown key bogus)\n'],
  ]) {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(IMPAIR)}); console.log('loaded');`], {
      encoding: 'utf8',
      timeout: 20_000,
      env: { ...process.env, RDMACM_ROCE_IMPAIR: env },
    });
    assert.equal(r.status, 1, r.stderr);
    assert.equal(r.stderr, line);
    assert.equal(r.stdout, '');
  }
});

test('seeded: the same seed gives the same pattern, another seed another', () => {
  const cfg = { loss: 0.2, dup: 0.1, corrupt: 0.1, seed: 42 };
  const a = pattern(cfg);
  assert.equal(pattern(cfg), a);
  assert.notEqual(pattern({ ...cfg, seed: 43 }), a);
  assert.match(a, /0/);
  assert.match(a, /2/);
  // The pattern of a configuration without the new keys is the one it always was (loss, dup and
  // reorder draw as before): loss 1 with dup 1 drops everything.
  assert.equal(pattern({ loss: 1, dup: 1, seed: 1 }, 10), '0000000000');
});

test('corrupt: one bit flipped after the transport headers; the headers still parse and the ICRC fails', () => {
  const net = { ...NET, sport: 0xc001 };
  const pkt = wire.encodeRocePacket({ opcode: wire.IbOpcode.RC_SEND_ONLY, destQp: 0x11, psn: 5, pkey: 0xffff, ackReq: true, payload: new Uint8Array(40).fill(7) }, net);
  assert.equal(wire.icrcVerify(net, pkt, 0, pkt.length), true);
  const hdr = wire.IB_OPCODES[wire.IbOpcode.RC_SEND_ONLY].length;
  for (const r of [0, 0.25, 0.5, 0.999]) {
    const bad = corruptCopy(pkt, r);
    let bits = 0;
    let first = -1;
    for (let i = 0; i < pkt.length; i++) {
      const x = bad[i] ^ pkt[i];
      if (x !== 0 && first < 0) first = i;
      for (let b = x; b; b &= b - 1) bits++;
    }
    assert.equal(bits, 1, `r=${r}`);
    assert.ok(first >= hdr, `bit ${first} is after the ${hdr}-byte headers`);
    assert.equal(wire.parseRocePacket(bad, 0, bad.length, new wire.RocePacket(), { pkey: wire.BTH_DEF_PKEY }), null, 'headers intact');
    assert.equal(wire.icrcVerify(net, bad, 0, bad.length), false, 'ICRC fails');
  }
  // An ACK (no payload): the bit lands in the ICRC.
  const ack = wire.encodeRocePacket({ opcode: wire.IbOpcode.RC_ACKNOWLEDGE, destQp: 0x11, psn: 5, pkey: 0xffff, aeth: { syndrome: 0, msn: 1 } }, net);
  const badAck = corruptCopy(ack, 0.5);
  assert.deepEqual(badAck.subarray(0, ack.length - 4), Buffer.from(ack.subarray(0, ack.length - 4)));
  assert.equal(wire.icrcVerify(net, badAck, 0, badAck.length), false);
});

test('corrupt 1: every datagram goes out as a corrupted copy; counted per device and per process', (t) => {
  t.after(() => configureRoceImpairment(null));
  const ctr = new RoceCounters();
  configureRoceImpairment({ corrupt: 1, seed: 5 });
  const sent = [];
  for (let i = 0; i < 5; i++) impairedSend(RC_SEND, (b) => sent.push(b), ctr);
  assert.equal(sent.length, 5);
  for (const b of sent) {
    assert.ok(Buffer.isBuffer(b) && b.length === RC_SEND.length && !b.equals(RC_SEND));
  }
  assert.equal(ctr.snapshot().inject_corrupt, 5);
  assert.equal(roceImpairmentCounts().corrupted, 5);
});

test('partition: datagram partition_at starts it; everything for partition ms is dropped, then traffic flows', async (t) => {
  t.after(() => configureRoceImpairment(null));
  const ctr = new RoceCounters();
  configureRoceImpairment({ partitionMs: 150, partitionAt: 3 });
  const n = [];
  const one = () => {
    let k = 0;
    impairedSend(RC_SEND, () => k++, ctr);
    return k;
  };
  for (let i = 0; i < 6; i++) n.push(one());
  assert.deepEqual(n, [1, 1, 0, 0, 0, 0]);
  await sleepMs(200);
  assert.deepEqual([one(), one()], [1, 1], 'over after partition ms, and never again');
  assert.equal(ctr.snapshot().inject_partition_drop, 4);
  assert.deepEqual(roceImpairmentCounts(), { ...ZERO, sent: 8, partitionDropped: 4 });
});

test('latency and jitter: each datagram later by latency..latency+jitter, in the order handed over', async (t) => {
  t.after(() => configureRoceImpairment(null));
  const ctr = new RoceCounters();
  configureRoceImpairment({ latencyMs: 40, jitterMs: 60, seed: 9 });
  const t0 = performance.now();
  const got = [];
  for (let i = 0; i < 30; i++) impairedSend(RC_SEND, () => got.push([i, performance.now() - t0]), ctr);
  assert.equal(got.length, 0, 'nothing at once');
  const deadline = Date.now() + 5000;
  while (got.length < 30 && Date.now() < deadline) await sleepMs(10);
  assert.deepEqual(got.map(([i]) => i), Array.from({ length: 30 }, (_, i) => i), 'order kept');
  for (const [, at] of got) assert.ok(at >= 39, `sent ${at.toFixed(1)} ms later`);
  assert.equal(ctr.snapshot().inject_delay, 30);
});

test('reorder, dup and loss count in the device counters', (t) => {
  t.after(() => configureRoceImpairment(null));
  const ctr = new RoceCounters();
  configureRoceImpairment({ loss: 1 });
  impairedSend(RC_SEND, () => {}, ctr);
  configureRoceImpairment({ dup: 1 });
  impairedSend(RC_SEND, () => {}, ctr);
  configureRoceImpairment({ reorder: 1, delayMs: 0 });
  impairedSend(RC_SEND, () => {}, ctr);
  const s = ctr.snapshot();
  assert.deepEqual([s.inject_drop, s.inject_dup, s.inject_reorder, s.inject_delay, s.inject_corrupt, s.inject_partition_drop], [1, 1, 1, 0, 0, 0]);
});
