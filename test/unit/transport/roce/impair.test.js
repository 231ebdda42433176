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
  assert.deepEqual(roceImpairmentCounts(), { sent: 4, dropped: 4, duplicated: 0, reordered: 0 });

  configureRoceImpairment({ loss: 1, dup: 1, reorder: 1, seed: 3, spareDreq: true });
  assert.deepEqual(sendAll([DREQ, DREP, RTU, RC_SEND, DREQ]), [1, 0, 0, 0, 1]);
  assert.deepEqual(roceImpairmentCounts(), { sent: 5, dropped: 3, duplicated: 0, reordered: 0 });

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
  assert.deepEqual(run('loss=1,seed=9,spare=dreq'), { n: 20, counts: { sent: 20, dropped: 0, duplicated: 0, reordered: 0 } });
  assert.deepEqual(run('loss=1,seed=9'), { n: 0, counts: { sent: 20, dropped: 20, duplicated: 0, reordered: 0 } });
});
