// Fault injection on the soft iWARP device (RDMACM_IWARP_FAULTS): the parser, the per-FPDU
// injector on a stream cut at random places (delay, stall, reset, a wrong CRC), seeded patterns,
// the counters; and a CRC fault between two QPs of this process: the receiver answers with a
// TERMINATE (LLP layer, MPA CRC error), both QPs go to ERR and every posted work request
// completes, flushed or in error.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT } from '../../../lib/tools.js';
import { rcPair, reap } from '../../../lib/cm-rc-pair.js';
import { until } from '../../../lib/wait.js';

const FAULTS = join(REPO_ROOT, 'dist', 'transport', 'iwarp', 'faults.js');
const { configureIwarpFaults, parseIwarpFaults, iwarpFaultCounts, FpduFaults } = await import(FAULTS);
const { IwarpCounters } = await import(join(REPO_ROOT, 'dist', 'transport', 'iwarp', 'counters.js'));
const { crc32c, fpduLength } = await import(join(REPO_ROOT, 'dist', 'wire', 'iwarp', 'index.js'));
const { RdmaError, QpState, WcStatus, WrOpcode, Access, SendFlags, iwarp } = await import(join(REPO_ROOT, 'dist', 'index.js'));
const sleepMs = (ms) => new Promise((r) => setTimeout(r, ms));

/** An FPDU with a ULPDU of `n` bytes of value `fill` and a correct CRC. */
function fpdu(n, fill) {
  const b = Buffer.alloc(fpduLength(n));
  b.writeUInt16BE(n, 0);
  b.fill(fill, 2, 2 + n);
  b.writeUInt32LE(crc32c(b.subarray(0, b.length - 4)), b.length - 4);
  return b;
}

/** Split a stream into its FPDUs. */
function split(stream) {
  const out = [];
  for (let at = 0; at < stream.length; ) {
    const len = fpduLength(stream.readUInt16BE(at));
    out.push(stream.subarray(at, at + len));
    at += len;
  }
  return out;
}

const crcOk = (f) => crc32c(f.subarray(0, f.length - 4)) === f.readUInt32LE(f.length - 4);

/** An injector writing into an array, with `cfg` configured; the stream is cut in random pieces. */
function harness(cfg, { crc = true, seed = 1 } = {}) {
  configureIwarpFaults(cfg);
  const written = [];
  let resets = 0;
  const ctr = new IwarpCounters();
  const f = FpduFaults.forConnection({ write: (b, cb) => (written.push({ b: Buffer.from(b), at: performance.now() }), cb?.(null)), reset: () => resets++ }, crc, ctr);
  let r = seed;
  const rnd = () => ((r = (r * 1103515245 + 12345) & 0x7fffffff) / 0x80000000);
  /** Write FPDUs (cut at random places, several per write at times); the callbacks' errors. */
  const feed = (fpdus) => {
    const all = Buffer.concat(fpdus);
    const errs = [];
    for (let at = 0; at < all.length; ) {
      const n = Math.min(all.length - at, 1 + Math.floor(rnd() * 300));
      f.write(all.subarray(at, at + n), (e) => errs.push(e ?? null));
      at += n;
    }
    return errs;
  };
  return { f, written, ctr, feed, resets: () => resets, stream: () => Buffer.concat(written.map((w) => w.b)) };
}

const FPDUS = Array.from({ length: 12 }, (_, i) => fpdu(37 * i + 1, i));

test('RDMACM_IWARP_FAULTS text: every key, in its API name', () => {
  assert.deepEqual(parseIwarpFaults('latency=1.5,jitter=2,stall=300,stall_at=4,stall_every=10,reset=7,crc=3,corrupt=0.25,seed=9'), {
    latencyMs: 1.5,
    jitterMs: 2,
    stallMs: 300,
    stallAt: 4,
    stallEvery: 10,
    reset: 7,
    crc: 3,
    corrupt: 0.25,
    seed: 9,
  });
  assert.deepEqual(parseIwarpFaults(' '), {});
});

test('RDMACM_IWARP_FAULTS text and iwarp.configureFaults: bad input is EINVAL naming the key', () => {
  for (const [text, why] of [
    ['loss=0.1', /unknown key loss/],
    ['corrupt=2', /corrupt=2: a probability above 1/],
    ['latency=-1', /latency=-1: negative/],
    ['stall=abc', /stall=abc: not a number/],
    ['reset=2.5', /reset=2\.5: not a whole number/],
    ['crc=-3', /crc=-3: negative/],
    ['stall_every=1e400', /stall_every=1e400: not a number/],
  ]) {
    assert.throws(() => parseIwarpFaults(text), (e) => e instanceof RdmaError && e.code === 'EINVAL' && why.test(e.message), text);
  }
  for (const cfg of [{ corrupt: 1.01 }, { stallMs: -5 }, { reset: 0.5 }, { latency: 3 }, { crc: '3' }]) {
    assert.throws(() => iwarp.configureFaults(cfg), (e) => e instanceof RdmaError && e.code === 'EINVAL' && e.op === 'configureIwarpFaults', JSON.stringify(cfg));
  }
  iwarp.configureFaults(null);
});

test('RDMACM_IWARP_FAULTS with a bad value: one line on stderr and exit status 1', () => {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(FAULTS)}); console.log('loaded');`], {
    encoding: 'utf8',
    timeout: 20_000,
    env: { ...process.env, RDMACM_IWARP_FAULTS: 'reset=3,stal=100' },
  });
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stderr, 'rdmacm: RDMACM_IWARP_FAULTS: Invalid argument (unknown key stal)\n');
});

test('no faults configured: no injector', () => {
  configureIwarpFaults(null);
  assert.equal(FpduFaults.forConnection({ write() {}, reset() {} }, true, new IwarpCounters()), null);
});

test('crc=K: FPDU K alone goes out with one bit of its CRC flipped, however the stream is cut', () => {
  for (const seed of [1, 2, 3, 4, 5]) {
    const h = harness({ crc: 5 }, { seed });
    h.feed(FPDUS);
    const out = split(h.stream());
    assert.equal(out.length, FPDUS.length);
    out.forEach((f, i) => {
      assert.equal(crcOk(f), i !== 4, `FPDU ${i + 1}`);
      assert.deepEqual(f.subarray(0, f.length - 4), FPDUS[i].subarray(0, FPDUS[i].length - 4));
    });
    assert.equal(out[4].readUInt32LE(out[4].length - 4) ^ FPDUS[4].readUInt32LE(FPDUS[4].length - 4), 1);
    assert.equal(h.ctr.snapshot().inject_crc, 1);
  }
  // Without MPA CRC on the connection there is nothing to spoil.
  const h = harness({ crc: 5 }, { crc: false });
  h.feed(FPDUS);
  assert.deepEqual(h.stream(), Buffer.concat(FPDUS));
  assert.equal(h.ctr.snapshot().inject_crc, 0);
  configureIwarpFaults(null);
});

test('corrupt=P: seeded, the same seed spoils the same FPDUs, another seed others', () => {
  const spoiled = (seed) => {
    const h = harness({ corrupt: 0.3, seed });
    const many = Array.from({ length: 60 }, (_, i) => fpdu(i % 50, i));
    h.feed(many);
    const bad = split(h.stream()).map((f) => (crcOk(f) ? '.' : 'x')).join('');
    assert.equal(h.ctr.snapshot().inject_crc, bad.split('x').length - 1);
    return bad;
  };
  const a = spoiled(77);
  assert.match(a, /x/);
  assert.match(a, /\./);
  assert.equal(spoiled(77), a);
  assert.notEqual(spoiled(78), a);
  assert.equal(iwarpFaultCounts().crc, spoiled(78).split('x').length - 1);
  configureIwarpFaults(null);
});

test('reset=K: the FPDUs before K are written, then the reset; nothing after it, and later writes fail', () => {
  const h = harness({ reset: 4 });
  const errs = h.feed(FPDUS);
  assert.deepEqual(h.stream(), Buffer.concat(FPDUS.slice(0, 3)));
  assert.equal(h.resets(), 1);
  assert.ok(errs.some((e) => e instanceof Error), 'the write that held FPDU 4 failed');
  assert.ok(errs.at(-1) instanceof Error);
  assert.equal(h.ctr.snapshot().inject_reset, 1);
  configureIwarpFaults(null);
});

test('stall: the connection sends nothing for stall ms before FPDU stall_at, then again every stall_every FPDUs', async () => {
  const h = harness({ stallMs: 120, stallAt: 2, stallEvery: 3 });
  const t0 = performance.now();
  for (const f of FPDUS.slice(0, 5)) h.f.write(f);
  // FPDU 1 at once; 2..4 after the first stall; 5 after the second.
  assert.equal(h.written.length, 1);
  await until(() => h.stream().length === Buffer.concat(FPDUS.slice(0, 5)).length, 3000);
  assert.deepEqual(h.stream(), Buffer.concat(FPDUS.slice(0, 5)), 'order and bytes kept');
  const when = (i) => h.written.find((w) => w.b.equals(FPDUS[i])).at - t0;
  assert.ok(when(1) >= 115, `FPDU 2 at ${when(1)}`);
  assert.ok(when(4) >= 230, `FPDU 5 at ${when(4)}`);
  assert.equal(h.ctr.snapshot().inject_stall, 2);
  configureIwarpFaults(null);
});

test('latency and jitter: every FPDU later by latency..latency+jitter, in order; a graceful end waits for them', async () => {
  const h = harness({ latencyMs: 30, jitterMs: 40, seed: 3 });
  const t0 = performance.now();
  const errs = h.feed(FPDUS);
  assert.equal(h.written.length, 0);
  let ended = 0;
  h.f.whenEmpty(() => (ended = performance.now() - t0));
  await until(() => ended > 0, 3000);
  assert.deepEqual(h.stream(), Buffer.concat(FPDUS));
  assert.ok(h.written[0].at - t0 >= 29);
  assert.ok(errs.every((e) => e === null));
  assert.equal(h.ctr.snapshot().inject_delay, FPDUS.length);
  configureIwarpFaults(null);
});

test('a connection that goes away: held writes complete with an error, nothing more is written', () => {
  const h = harness({ stallMs: 10_000 });
  const errs = h.feed(FPDUS.slice(0, 3));
  assert.equal(errs.length, 0);
  h.f.drop(new Error('gone'));
  assert.ok(errs.length > 0 && errs.every((e) => e?.message === 'gone'));
  assert.equal(h.written.length, 0);
  configureIwarpFaults(null);
});

test('crc=K between two QPs: the receiver sends a TERMINATE (MPA CRC error), both QPs go to ERR, every work request completes', async (t) => {
  iwarp.configureFaults({ crc: 3 });
  t.after(() => iwarp.configureFaults(null));
  const before = iwarp.counters('siw_lo');
  const { a, b, close } = await rcPair({ send: 8, recv: 8 });
  t.after(close);
  const ma = a.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
  const mb = b.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
  for (let i = 0; i < 4; i++) b.qp.postRecv({ wrId: i, sgList: [{ addr: mb.addr, length: 64, lkey: mb.lkey }] });
  a.qp.postRecv({ wrId: 99, sgList: [{ addr: ma.addr, length: 64, lkey: ma.lkey }] });
  for (let i = 0; i < 4; i++) a.qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: ma.addr, length: 8, lkey: ma.lkey }] });
  await until(() => a.qp.state === QpState.ERR && b.qp.state === QpState.ERR, 5000);
  const bw = await reap(b.recvCq, 4);
  const aw = [...(await reap(a.sendCq, 4)), ...(await reap(a.recvCq, 1))];
  // b received what came before the spoiled FPDU and nothing from it on.
  assert.ok(bw.filter((w) => w.status === WcStatus.SUCCESS).length <= 2, JSON.stringify(bw));
  assert.ok(bw.some((w) => w.status !== WcStatus.SUCCESS));
  assert.ok(aw.some((w) => Number(w.wrId) === 99 && w.status === WcStatus.WR_FLUSH_ERR), 'the receive of the sending side is flushed');
  const after = iwarp.counters('siw_lo');
  const d = (k) => after[k] - before[k];
  assert.equal(d('inject_crc'), 1);
  assert.equal(d('mpaCrcErrors'), 1);
  assert.equal(d('llpErrors'), 1);
  assert.ok(d('iwTerminatesSent') >= 1 && d('iwTerminatesRcvd') >= 1, JSON.stringify({ sent: d('iwTerminatesSent'), rcvd: d('iwTerminatesRcvd') }));
});
