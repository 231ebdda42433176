import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LO, ETH, SMALL, dev, code, prng } from '../../lib/fake-provider.js';
import {
  MrCheck,
  mrCheckStr,
  mrOffset,
  localSgeOffset,
  remoteAccessOffset,
  invalidateStag,
  stagStr,
  MR_VA_BASE,
  MR_VA_LIMIT,
  MR_PAGE_SIZE,
  MAX_STAG_INDEX,
} from '../../../dist/verbs/mr.js';
import { Access } from '../../../dist/verbs/types.js';

const { LOCAL_WRITE: LW, REMOTE_WRITE: RW, REMOTE_READ: RR, REMOTE_ATOMIC: RA, MW_BIND, ZERO_BASED } = Access;
const ALL = LW | RW | RR;

function setup(info = LO) {
  const ctx = dev(info).open();
  const pd = ctx.allocPd();
  return { ctx, pd };
}

test('regMr: a view of the memory, synthetic page-aligned addresses, lkey == rkey', () => {
  const { ctx, pd } = setup();
  const mem = Buffer.alloc(10000);
  const a = pd.regMr(mem, ALL);
  const b = pd.regMr(new Uint8Array(1), LW);
  assert.equal(a.length, 10000);
  assert.equal(a.buf.byteLength, 10000);
  mem[5] = 42;
  assert.equal(a.buf[5], 42, 'no copy');
  a.buf[6] = 7;
  assert.equal(mem[6], 7, 'no copy');
  assert.ok(a.addr >= MR_VA_BASE);
  assert.equal(a.addr % MR_PAGE_SIZE, 0);
  assert.equal(b.addr % MR_PAGE_SIZE, 0);
  assert.ok(b.addr >= a.addr + a.length + MR_PAGE_SIZE || a.addr >= b.addr + MR_PAGE_SIZE, 'guard page between MRs');
  assert.equal(a.lkey, a.rkey);
  assert.notEqual(a.lkey, 0);
  assert.notEqual(a.lkey, b.lkey);
  assert.equal(a.handle, a.lkey >>> 8);
  assert.ok(a.handle >= 1);
  assert.equal(a.pd, pd);
  assert.equal(a.context, ctx);
  assert.equal(a.access, ALL);
  assert.equal(ctx._mrs.lookup(a.lkey), a);
  assert.equal(ctx._mrs.lookup(b.rkey), b);
  assert.equal(stagStr(0x100), '0x00000100');
  a.dereg();
  b.dereg();
  pd.dealloc();
});

test('regMr: views register exactly their bytes; ArrayBuffer, SharedArrayBuffer, typed arrays', () => {
  const { pd } = setup();
  const big = Buffer.alloc(64);
  const slice = big.subarray(16, 32);
  const m = pd.regMr(slice, LW);
  assert.equal(m.length, 16);
  m.buf[0] = 9;
  assert.equal(big[16], 9);
  const ab = new ArrayBuffer(8);
  const m2 = pd.regMr(ab, 0);
  assert.equal(m2.length, 8);
  const sab = new SharedArrayBuffer(32);
  const m3 = pd.regMr(sab, LW | RR);
  assert.equal(m3.buf.buffer, sab);
  const f = new Float64Array(4);
  const m4 = pd.regMr(f, LW);
  assert.equal(m4.length, 32);
  for (const x of [m, m2, m3, m4]) x.dereg();
  pd.dealloc();
});

test('regMr: argument validation (errno EINVAL)', () => {
  const { pd } = setup();
  const mem = new Uint8Array(16);
  assert.throws(() => pd.regMr(mem, RW), code('EINVAL'), 'remote write needs local write');
  assert.throws(() => pd.regMr(mem, RW | RR), code('EINVAL'));
  assert.throws(() => pd.regMr(mem, RA), code('EINVAL'), 'remote atomic needs local write');
  assert.throws(() => pd.regMr(mem, 64), code('EINVAL'), 'unknown access bit');
  assert.throws(() => pd.regMr(mem, -1), code('EINVAL'));
  assert.throws(() => pd.regMr(mem, 1.5), code('EINVAL'));
  assert.throws(() => pd.regMr(mem, '1'), code('EINVAL'));
  assert.throws(() => pd.regMr(new Uint8Array(0), LW), code('EINVAL'), 'zero length, as siw');
  assert.throws(() => pd.regMr('abc', LW), code('EINVAL'));
  assert.throws(() => pd.regMr({ length: 4 }, LW), code('EINVAL'));
  assert.throws(() => pd.regMr(mem, LW, -1), code('EINVAL'));
  assert.throws(() => pd.regMr(mem, LW, 1.5), code('EINVAL'));
  assert.throws(() => pd.regMr(mem, LW, 2 ** 53), code('EINVAL'));
  assert.throws(() => pd.regMr(mem, LW, Number.MAX_SAFE_INTEGER - 8), code('EINVAL'), 'iova + length beyond 2^53');
  let resizable;
  try {
    resizable = new ArrayBuffer(8, { maxByteLength: 16 });
  } catch {
    resizable = undefined;
  }
  if (resizable && resizable.resizable) assert.throws(() => pd.regMr(resizable, LW), code('EINVAL'));
  // accepted: RR alone, LW|RA (atomics are not granted), MW_BIND
  const ok = [pd.regMr(mem, RR), pd.regMr(mem, LW | RA), pd.regMr(mem, MW_BIND)];
  for (const m of ok) m.dereg();
  pd.dealloc();
  assert.throws(() => pd.regMr(mem, LW), code('EINVAL'), 'PD deallocated');
});

test('regMr with iova and ZERO_BASED', () => {
  const { ctx, pd } = setup();
  const mem = new Uint8Array(100);
  const m = pd.regMr(mem, ALL, 0x1234);
  assert.equal(m.addr, 0x1234);
  assert.equal(localSgeOffset(ctx, pd, { addr: 0x1234 + 10, length: 5, lkey: m.lkey }, true), 10);
  const z = pd.regMr(mem, ALL | ZERO_BASED);
  assert.equal(z.addr, 0);
  assert.equal(remoteAccessOffset(z, pd, z.rkey, 99, 1, RW), 99);
  const top = pd.regMr(mem, LW, Number.MAX_SAFE_INTEGER - 100);
  assert.equal(top.addr + top.length, Number.MAX_SAFE_INTEGER);
  for (const x of [m, z, top]) x.dereg();
  pd.dealloc();
});

test('STag = (index << 8) | key, both random; STag 0 never issued; a stale STag does not resolve', () => {
  const { ctx, pd } = setup(ETH);
  const mem = new Uint8Array(8);
  const first = pd.regMr(mem, LW);
  assert.equal(first.handle, first.lkey >>> 8);
  first.dereg();
  // re-registering the same memory again and again never brings the stale STag back
  const seen = new Set([first.lkey]);
  for (let k = 0; k < 2000; k++) {
    const m = pd.regMr(mem, LW);
    assert.ok(!seen.has(m.lkey), 'no STag repeats');
    assert.notEqual(m.handle, 0);
    assert.equal(ctx._mrs.lookup(first.lkey), undefined, 'stale STag does not resolve');
    seen.add(m.lkey);
    m.dereg();
  }
  // many live MRs: distinct indices, no STag 0, all unsigned 32-bit
  const live = [];
  for (let k = 0; k < 3000; k++) live.push(pd.regMr(mem, LW));
  assert.equal(new Set(live.map((m) => m.handle)).size, live.length, 'distinct indices');
  for (const m of live) {
    assert.ok(m.lkey > 0 && m.lkey <= 0xffffffff && Number.isInteger(m.lkey));
    assert.equal(ctx._mrs.lookup(m.lkey), m);
  }
  for (const m of live) m.dereg();
  assert.equal(ctx._mrs.size, 0);
  pd.dealloc();
});

/** How many of `values` have bit `b` set, for each bit below `bits`. */
function bitCounts(values, bits) {
  const c = new Array(bits).fill(0);
  for (const v of values) for (let b = 0; b < bits; b++) if (Math.floor(v / 2 ** b) % 2 === 1) c[b]++;
  return c;
}

test('STags and addresses are unpredictable: every bit flips about half the time, no stride', () => {
  const { pd } = setup(ETH);
  const N = 2000;
  const mrs = [];
  for (let k = 0; k < N; k++) mrs.push(pd.regMr(new Uint8Array(64), LW | RW));
  const keys = mrs.map((m) => m.lkey & 0xff);
  const indices = mrs.map((m) => m.handle);
  const pages = mrs.map((m) => (m.addr - MR_VA_BASE) / MR_PAGE_SIZE);
  // Each bit of the key (8), the index (23) and the page number (first 36 of its 40) is set in
  // 30-70 % of the draws (a fair coin leaves that band with probability below 1e-60).
  for (const [what, vals, bits] of [['key', keys, 8], ['index', indices, 23], ['page', pages, 36]]) {
    for (const [b, n] of bitCounts(vals, bits).entries()) {
      assert.ok(n > 0.3 * N && n < 0.7 * N, `${what} bit ${b} set in ${n} of ${N}`);
    }
  }
  // Bit 31 of the STag (the index's 24th bit) is never set: every STag is a small integer.
  assert.ok(mrs.every((m) => m.lkey < 2 ** 31 && m.handle <= MAX_STAG_INDEX), 'every STag below 2^31');
  // No constant step between consecutive registrations, and no order.
  const steps = (v) => new Set(v.slice(1).map((x, i) => x - v[i]));
  assert.ok(steps(mrs.map((m) => m.lkey)).size > N / 2, 'STag steps vary');
  assert.ok(steps(mrs.map((m) => m.addr)).size > N / 2, 'address steps vary');
  const ups = mrs.slice(1).filter((m, i) => m.addr > mrs[i].addr).length;
  assert.ok(ups > 0.3 * N && ups < 0.7 * N, `addresses rise ${ups} times of ${N - 1}`);
  for (const m of mrs) m.dereg();
  pd.dealloc();
});

test('synthetic addresses: page aligned, inside the address space, never overlapping (guard page after each), freed on dereg', () => {
  const { ctx, pd } = setup(ETH);
  const sizes = [1, 100, 4095, 4096, 4097, 65536, 1 << 20, (1 << 28) - 4096, 1 << 28, 600 * (1 << 20)];
  const live = [];
  for (let round = 0; round < 20; round++) for (const n of sizes) live.push(pd.regMr(new ArrayBuffer(n), LW));
  const byAddr = [...live].sort((a, b) => a.addr - b.addr);
  for (const [i, m] of byAddr.entries()) {
    assert.equal(m.addr % MR_PAGE_SIZE, 0);
    assert.ok(m.addr >= MR_VA_BASE && m.addr + m.length + MR_PAGE_SIZE <= MR_VA_LIMIT, `0x${m.addr.toString(16)}`);
    const next = byAddr[i + 1];
    if (next) assert.ok(m.addr + Math.ceil(m.length / MR_PAGE_SIZE) * MR_PAGE_SIZE + MR_PAGE_SIZE <= next.addr, 'no overlap, guard page between');
  }
  assert.ok(ctx._mrs._vaSlots.size >= live.length);
  for (const m of live) m.dereg();
  assert.equal(ctx._mrs._vaSlots.size, 0, 'every address slot freed');
  // caller-chosen addresses take no slot and may overlap anything
  const a = pd.regMr(new Uint8Array(8), LW, MR_VA_BASE);
  const z = pd.regMr(new Uint8Array(8), LW | ZERO_BASED);
  assert.equal(ctx._mrs._vaSlots.size, 0);
  a.dereg();
  z.dereg();
  pd.dealloc();
});

test('dereg invalidates: local use fails INVALID_STAG, remote access fails INVALID_STAG; double dereg EINVAL', () => {
  const { ctx, pd } = setup();
  const m = pd.regMr(new Uint8Array(64), ALL);
  const sge = { addr: m.addr, length: 8, lkey: m.lkey };
  assert.equal(localSgeOffset(ctx, pd, sge, true), 0);
  assert.equal(remoteAccessOffset(ctx._mrs.lookup(m.rkey), pd, m.rkey, m.addr, 8, RW), 0);
  m.dereg();
  assert.equal(m.registered, false);
  assert.equal(m.stagValid, false);
  assert.equal(localSgeOffset(ctx, pd, sge, true), MrCheck.INVALID_STAG);
  assert.equal(ctx._mrs.last, undefined);
  assert.equal(remoteAccessOffset(ctx._mrs.lookup(m.rkey), pd, m.rkey, m.addr, 8, RW), MrCheck.INVALID_STAG);
  // a transport that cached the Mr object still gets INVALID_STAG
  assert.equal(remoteAccessOffset(m, pd, m.rkey, m.addr, 8, RW), MrCheck.INVALID_STAG);
  assert.equal(mrOffset(m, pd, m.addr, 8, 0), MrCheck.INVALID_STAG);
  assert.throws(() => m.dereg(), code('EINVAL'));
  pd.dealloc();
});

test('localSgeOffset: every reason code', () => {
  const { ctx, pd } = setup();
  const pd2 = ctx.allocPd();
  const m = pd.regMr(new Uint8Array(100), LW | RR);
  const ro = pd.regMr(new Uint8Array(100), 0);
  const L = (addr, length, lkey = m.lkey, w = true, p = pd) => localSgeOffset(ctx, p, { addr, length, lkey }, w);
  assert.equal(L(m.addr, 100), 0);
  assert.equal(ctx._mrs.last, m);
  assert.equal(L(m.addr + 40, 10), 40);
  assert.equal(L(m.addr + 99, 1), 99);
  assert.equal(L(m.addr - 1, 1), MrCheck.BOUNDS, 'starts before the MR');
  assert.equal(L(m.addr - 1, 2), MrCheck.BOUNDS);
  assert.equal(L(m.addr + 99, 2), MrCheck.BOUNDS, 'ends past the MR');
  assert.equal(L(m.addr, 101), MrCheck.BOUNDS);
  assert.equal(L(m.addr + 100, 1), MrCheck.BOUNDS);
  assert.equal(L(2 ** 53, 1), MrCheck.BOUNDS, 'unsafe address');
  assert.equal(L(m.addr, 2 ** 53), MrCheck.BOUNDS, 'unsafe length');
  assert.equal(L(Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER), MrCheck.BOUNDS);
  assert.equal(L(m.addr, -1), MrCheck.BOUNDS);
  assert.equal(L(m.addr + 0.5, 1), MrCheck.BOUNDS);
  assert.equal(L(NaN, 1), MrCheck.BOUNDS);
  assert.equal(L(m.addr, Infinity), MrCheck.BOUNDS);
  assert.equal(L(m.addr, 4, m.lkey, true, pd2), MrCheck.PD_MISMATCH);
  assert.equal(L(ro.addr, 4, ro.lkey, true), MrCheck.ACCESS, 'LOCAL_WRITE missing');
  assert.equal(L(ro.addr, 4, ro.lkey, false), 0, 'local read is always allowed');
  assert.equal(L(m.addr, 4, 0), MrCheck.INVALID_STAG, 'STag 0');
  assert.equal(L(m.addr, 4, 0xdeadbe00), MrCheck.INVALID_STAG, 'unknown index');
  assert.equal(L(m.addr, 4, (m.lkey & ~0xff) | ((m.lkey + 1) & 0xff)), MrCheck.INVALID_STAG, 'key mismatch');
  assert.equal(L(m.addr, 4, -1), MrCheck.INVALID_STAG);
  assert.equal(L(m.addr, 4, 2 ** 40 + m.lkey), MrCheck.INVALID_STAG);
  // zero length: accepted without looking at the lkey
  assert.equal(L(12345, 0, 0xdeadbe00), 0);
  assert.equal(ctx._mrs.last, undefined);
  // check order (siw_check_mem): STag, PD, access, bounds
  assert.equal(L(ro.addr - 1, 4, ro.lkey, true, pd2), MrCheck.PD_MISMATCH);
  assert.equal(L(ro.addr - 1, 4, ro.lkey, true, pd), MrCheck.ACCESS);
  m.dereg();
  ro.dereg();
  pd.dealloc();
  pd2.dealloc();
});

test('remoteAccessOffset: every reason code', () => {
  const { ctx, pd } = setup();
  const pd2 = ctx.allocPd();
  const w = pd.regMr(new Uint8Array(4096), LW | RW);
  const r = pd.regMr(new Uint8Array(4096), RR);
  const R = (mr, stag, to, len, acc, p = pd) => remoteAccessOffset(mr, p, stag, to, len, acc);
  assert.equal(R(w, w.rkey, w.addr, 4096, RW), 0);
  assert.equal(R(w, w.rkey, w.addr + 4095, 1, RW), 4095);
  assert.equal(R(r, r.rkey, r.addr + 100, 200, RR), 100);
  assert.equal(R(w, w.rkey, w.addr, 1, RR), MrCheck.ACCESS, 'no REMOTE_READ');
  assert.equal(R(r, r.rkey, r.addr, 1, RW), MrCheck.ACCESS, 'no REMOTE_WRITE');
  assert.equal(R(w, w.rkey, w.addr, 1, RA), MrCheck.ACCESS, 'atomics never granted');
  assert.equal(R(undefined, w.rkey, w.addr, 1, RW), MrCheck.INVALID_STAG);
  assert.equal(R(w, w.rkey ^ 1, w.addr, 1, RW), MrCheck.INVALID_STAG, 'key mismatch');
  assert.equal(R(w, r.rkey, w.addr, 1, RW), MrCheck.INVALID_STAG, 'STag of another MR');
  assert.equal(R(w, w.rkey, w.addr, 1, RW, pd2), MrCheck.PD_MISMATCH);
  assert.equal(R(w, w.rkey, w.addr - 1, 1, RW), MrCheck.BOUNDS);
  assert.equal(R(w, w.rkey, w.addr - 4096, 4097, RW), MrCheck.BOUNDS);
  assert.equal(R(w, w.rkey, w.addr + 4096, 1, RW), MrCheck.BOUNDS);
  assert.equal(R(w, w.rkey, w.addr + 1, 4096, RW), MrCheck.BOUNDS);
  assert.equal(R(w, w.rkey, 2 ** 53, 1, RW), MrCheck.BOUNDS);
  assert.equal(R(w, w.rkey, 2 ** 64, 1, RW), MrCheck.BOUNDS);
  assert.equal(R(w, w.rkey, w.addr, 2 ** 53, RW), MrCheck.BOUNDS);
  assert.equal(R(w, w.rkey, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, RW), MrCheck.BOUNDS);
  assert.equal(R(w, w.rkey, w.addr + 10, -10, RW), MrCheck.BOUNDS);
  assert.equal(R(w, w.rkey, -1, 1, RW), MrCheck.BOUNDS);
  assert.equal(R(w, w.rkey, w.addr, NaN, RW), MrCheck.BOUNDS);
  // zero-length: any STag
  assert.equal(R(undefined, 0x12345678, 0, 0, RW), 0);
  assert.equal(R(w, 0, 2 ** 60, 0, RW), 0);
  // mrOffset is strict for zero length
  assert.equal(mrOffset(w, pd, w.addr + 4096, 0, RW), 4096);
  assert.equal(mrOffset(w, pd, w.addr + 4097, 0, RW), MrCheck.BOUNDS);
  assert.equal(mrOffset(w, pd2, w.addr, 0, RW), MrCheck.PD_MISMATCH);
  // lookup + check, as the transport does
  assert.equal(R(ctx._mrs.lookup(w.rkey), w.rkey, w.addr + 8, 8, RW), 8);
  w.dereg();
  r.dereg();
  pd.dealloc();
  pd2.dealloc();
});

test('invalidateStag: later checks fail; PD mismatch and unknown STags are refused', () => {
  const { ctx, pd } = setup();
  const pd2 = ctx.allocPd();
  const m = pd.regMr(new Uint8Array(16), ALL);
  assert.equal(invalidateStag(ctx, pd2, m.rkey), MrCheck.PD_MISMATCH);
  assert.equal(invalidateStag(ctx, pd, m.rkey ^ 0x80), MrCheck.INVALID_STAG);
  assert.equal(invalidateStag(ctx, pd, m.rkey), 0);
  assert.equal(invalidateStag(ctx, pd, m.rkey), 0, 'already invalid is fine');
  assert.equal(m.registered, true);
  assert.equal(m.stagValid, false);
  assert.equal(remoteAccessOffset(m, pd, m.rkey, m.addr, 1, RW), MrCheck.INVALID_STAG);
  assert.equal(localSgeOffset(ctx, pd, { addr: m.addr, length: 1, lkey: m.lkey }, false), MrCheck.INVALID_STAG);
  m.dereg();
  pd.dealloc();
  pd2.dealloc();
});

test('mrCheckStr names every code', () => {
  assert.equal(mrCheckStr(0), 'ok');
  assert.equal(mrCheckStr(17), 'ok');
  assert.equal(mrCheckStr(MrCheck.INVALID_STAG), 'invalid STag');
  assert.equal(mrCheckStr(MrCheck.BOUNDS), 'base or bounds violation');
  assert.equal(mrCheckStr(MrCheck.ACCESS), 'access rights violation');
  assert.equal(mrCheckStr(MrCheck.PD_MISMATCH), 'protection domain mismatch');
  assert.match(mrCheckStr(-99), /unknown/);
  assert.deepEqual([MrCheck.INVALID_STAG, MrCheck.BOUNDS, MrCheck.ACCESS, MrCheck.PD_MISMATCH], [-1, -2, -3, -4]);
});

test('property: an accepted [to, to+len) always lies inside the MR and the offset is to - addr', () => {
  const { ctx, pd } = setup(ETH);
  const rnd = prng(0x5eed);
  const mrs = [];
  for (let k = 0; k < 12; k++) {
    const len = 1 + Math.floor(rnd() * 5000);
    const iova = k % 3 === 0 ? Math.floor(rnd() * 2 ** 52) : undefined;
    mrs.push(pd.regMr(new Uint8Array(len), ALL, iova));
  }
  const pick = (m) => {
    const r = rnd();
    const near = [m.addr, m.addr + m.length, m.addr - 1, m.addr + m.length - 1, m.addr + m.length + 1, 0, 2 ** 53, Number.MAX_SAFE_INTEGER];
    if (r < 0.4) return (near[Math.floor(rnd() * near.length)] ?? 0) + Math.floor(rnd() * 3) - 1;
    if (r < 0.9) return m.addr + Math.floor((rnd() * 1.4 - 0.2) * m.length);
    if (r < 0.95) return rnd() * 2 ** 60;
    return -Math.floor(rnd() * 100);
  };
  const pickLen = (m) => {
    const r = rnd();
    if (r < 0.1) return Math.floor(rnd() * 3);
    if (r < 0.8) return Math.floor(rnd() * (m.length + 3));
    if (r < 0.9) return m.length - Math.floor(rnd() * 2);
    if (r < 0.95) return 2 ** 53 - Math.floor(rnd() * 3);
    return rnd() * 10;
  };
  let accepted = 0;
  for (let i = 0; i < 30000; i++) {
    const m = mrs[Math.floor(rnd() * mrs.length)];
    const to = pick(m);
    const len = pickLen(m);
    const r = remoteAccessOffset(m, pd, m.rkey, to, len, RW);
    const l = localSgeOffset(ctx, pd, { addr: to, length: len, lkey: m.lkey }, true);
    const s = mrOffset(m, pd, to, len, RW);
    const inside =
      Number.isSafeInteger(to) && Number.isSafeInteger(len) && len >= 0 && to >= m.addr && to + len <= m.addr + m.length;
    if (len === 0) {
      assert.equal(r, 0);
      assert.equal(l, 0);
    } else {
      assert.equal(r >= 0, inside, `remote to=${to} len=${len} mr=[${m.addr},+${m.length})`);
      assert.equal(l, r);
    }
    assert.equal(s >= 0, inside, `strict to=${to} len=${len}`);
    if (s >= 0) {
      accepted++;
      assert.equal(s, to - m.addr);
      assert.ok(s + len <= m.buf.byteLength);
    } else {
      assert.equal(s, MrCheck.BOUNDS);
    }
  }
  assert.ok(accepted > 5000, `enough accepted cases (${accepted})`);
  for (const m of mrs) m.dereg();
  pd.dealloc();
});

test('maxMr limit: ENOMEM', () => {
  const { pd } = setup(SMALL);
  const mem = new Uint8Array(4);
  const ms = [pd.regMr(mem, LW), pd.regMr(mem, LW), pd.regMr(mem, LW)];
  assert.throws(() => pd.regMr(mem, LW), code('ENOMEM'));
  ms[0].dereg();
  ms[0] = pd.regMr(mem, LW);
  for (const m of ms) m.dereg();
  pd.dealloc();
});

test('PD dealloc: EBUSY while MRs exist, EINVAL twice', () => {
  const { pd } = setup();
  const m = pd.regMr(new Uint8Array(8), LW);
  assert.throws(() => pd.dealloc(), code('EBUSY'));
  m.dereg();
  pd.dealloc();
  assert.equal(pd.deallocated, true);
  assert.throws(() => pd.dealloc(), code('EINVAL'));
});

test('MR tables are per device', () => {
  const a = setup(LO);
  const b = setup(ETH);
  const ma = a.pd.regMr(new Uint8Array(8), ALL);
  assert.notEqual(b.ctx._mrs.lookup(ma.rkey), ma);
  assert.equal(remoteAccessOffset(ma, b.pd, ma.rkey, ma.addr, 1, RW), MrCheck.PD_MISMATCH);
  ma.dereg();
  a.pd.dealloc();
  b.pd.dealloc();
});
