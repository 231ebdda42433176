// The memory window rules of src/verbs/mw.ts (rxe_mw.c, rxe_resp.c check_rkey) on a fake device
// that has windows: allocation and its limits, what a bind accepts and what it changes (the rkey's
// key byte, the MR's count of windows), remote accesses through a window checked against the
// window and its MR, invalidation, and what a bound window keeps the MR and PD from.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { registerProvider } from '../../../dist/verbs/provider.js';
import { getDeviceList } from '../../../dist/verbs/device.js';
import { Access, MwType, TransportType } from '../../../dist/verbs/types.js';
import { MrCheck } from '../../../dist/verbs/mr.js';
import { MwState, bindMw, invalidateRkey, remoteKeyOffset, incRkey } from '../../../dist/verbs/mw.js';
import { SIW_QUERIES, code } from '../../lib/fake-provider.js';

const INFO = {
  name: 'fakemw_lo',
  provider: 'fakemw',
  transport: TransportType.IB,
  ifname: 'lo',
  addresses: [],
  nodeGuid: 0x0200_0000_00aa_0000n,
  mtu: 65536,
  caps: { maxMw: 3 },
};
registerProvider({
  name: 'fakemw',
  ...SIW_QUERIES,
  accessMask: () => Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.MW_BIND,
  listDevices: () => [INFO],
  createQp() {
    throw new Error('no QPs here');
  },
  allocMw() {},
});
const ctx = getDeviceList().find((d) => d.name === INFO.name).open();
const QP = {}; // a QP's identity, as the requester and responder hand it over
const OTHER_QP = {};
const { LOCAL_WRITE: LW, REMOTE_WRITE: RW, REMOTE_READ: RR, MW_BIND, ZERO_BASED } = Access;

/** A BIND_MW's operands (rxe `wr.mw`) for window `mw`, its next rkey. */
const bindOf = (mw, mr, addr, length, access) => ({ mwRkey: mw.rkey, rkey: incRkey(mw.rkey), mrLkey: mr?.lkey ?? 0, addr, length, access });

/** Bind and keep the application's copy of the rkey in step, as an application does on success. */
function bind(pd, mw, mr, addr, length, access, qp = QP) {
  const b = bindOf(mw, mr, addr, length, access);
  const why = bindMw(ctx._mrs, qp, pd, b);
  if (why === null) mw.rkey = b.rkey;
  return why;
}

test('alloc: types 1 and 2, states, rkey indices shared with MRs, max_mw, dealloc', () => {
  const pd = ctx.allocPd();
  const mr = pd.regMr(Buffer.alloc(64), LW | MW_BIND);
  const w1 = pd.allocMw(MwType.TYPE_1);
  const w2 = pd.allocMw(MwType.TYPE_2);
  const w3 = pd.allocMw(MwType.TYPE_2);
  assert.deepEqual([w1.state, w2.state], [MwState.VALID, MwState.FREE]);
  assert.equal(new Set([mr.rkey >>> 8, w1.handle, w2.handle, w3.handle]).size, 4);
  assert.equal(ctx._mrs.lookupMw(w2.rkey), w2);
  assert.equal(ctx._mrs.lookup(w2.rkey), undefined, 'a window is no MR');
  assert.throws(() => pd.allocMw(MwType.TYPE_1), code('EINVAL'), 'beyond max_mw');
  assert.throws(() => pd.allocMw(0), code('EINVAL'));
  assert.throws(() => pd.dealloc(), code('EBUSY'));
  w3.dealloc();
  assert.equal(ctx._mrs.lookupMw(w3.rkey), undefined);
  assert.equal(w3.state, MwState.INVALID);
  assert.throws(() => w3.dealloc(), code('EINVAL'));
  for (const w of [w1, w2]) w.dealloc();
  mr.dereg();
  pd.dealloc();
});

test('bind: rxe_check_bind_mw\'s rules, each refusal leaving the window as it was', () => {
  const pd = ctx.allocPd();
  const pd2 = ctx.allocPd();
  const mr = pd.regMr(Buffer.alloc(4096), LW | MW_BIND);
  const noBind = pd.regMr(Buffer.alloc(64), LW);
  const readOnly = pd.regMr(Buffer.alloc(64), MW_BIND);
  const zb = pd.regMr(Buffer.alloc(64), LW | MW_BIND | ZERO_BASED);
  const w1 = pd.allocMw(MwType.TYPE_1);
  const w2 = pd.allocMw(MwType.TYPE_2);
  const key1 = w1.rkey;
  const cases = [
    ['MR without MW_BIND (C10-73)', w1, noBind, noBind.addr, 8, RR],
    ['writable window on an MR without LOCAL_WRITE (C10-74)', w1, readOnly, readOnly.addr, 8, RW],
    ['zero-based MR', w1, zb, 0, 8, RR],
    ['zero-based type 1 (o10-36.2.2)', w1, mr, mr.addr, 8, RR | ZERO_BASED],
    ['window past the MR (C10-75)', w1, mr, mr.addr + 4000, 97, RR],
    ['window before the MR', w1, mr, mr.addr - 1, 8, RR],
    ['zero-based window longer than the MR', w2, mr, mr.addr, 4097, RR | ZERO_BASED],
    ['type 2 with no length (o10-37.2.40)', w2, null, 0, 0, RR],
    ['an access right windows do not take', w1, mr, mr.addr, 8, RR | LW],
  ];
  for (const [what, w, m, addr, len, acc] of cases) {
    const before = { ...w.binding, rkey: w.rkey, state: w.state };
    assert.equal(typeof bind(pd, w, m, addr, len, acc), 'string', what);
    assert.deepEqual({ ...w.binding, rkey: w.rkey, state: w.state }, before, what);
  }
  assert.equal(typeof bind(pd2, w2, mr, mr.addr, 8, RR), 'string', 'type 2 through a QP of another PD (C10-72)');
  // The window is named by its current rkey: a stale one is refused.
  assert.equal(typeof bindMw(ctx._mrs, QP, pd, { ...bindOf(w1, mr, mr.addr, 8, RR), mwRkey: incRkey(key1) }), 'string');
  // The MR is named by its exact lkey.
  assert.equal(typeof bindMw(ctx._mrs, QP, pd, { ...bindOf(w1, mr, mr.addr, 8, RR), mrLkey: incRkey(mr.lkey) }), 'string');
  assert.equal(w1.rkey, key1);
  // Accepted: the key byte is the one the bind named, the index stays.
  assert.equal(bind(pd, w1, mr, mr.addr + 8, 8, RR), null);
  assert.equal(w1.rkey, incRkey(key1));
  assert.equal(w1.rkey >>> 8, key1 >>> 8);
  assert.equal(mr._mwCount, 1);
  assert.throws(() => mr.dereg(), code('EINVAL'), 'an MR with a window bound');
  assert.equal(invalidateRkey(ctx, pd, mr.rkey), MrCheck.ACCESS, 'nor invalidated (rxe_invalidate_mr)');
  // Type 2: bound only while free.
  assert.equal(bind(pd, w2, mr, mr.addr, 16, RW), null);
  assert.equal(w2.state, MwState.VALID);
  assert.equal(typeof bind(pd, w2, mr, mr.addr, 16, RW), 'string', 'o10-37.2.30');
  assert.equal(mr._mwCount, 2);
  // Unbinding type 1 (no MR, length 0) and freeing type 2 release the MR.
  assert.equal(bind(pd, w1, null, 0, 0, 0), null);
  assert.equal(invalidateRkey(ctx, pd, w2.rkey), 0);
  assert.equal(mr._mwCount, 0);
  mr.dereg();
  for (const x of [w1, w2]) x.dealloc();
  for (const x of [noBind, readOnly, zb]) x.dereg();
  pd.dealloc();
  pd2.dealloc();
});

test('remote access through a window: the window\'s rights and range, then its MR; type 2 on its QP only', () => {
  const pd = ctx.allocPd();
  const pd2 = ctx.allocPd();
  // The MR grants no remote right itself: the window does.
  const mr = pd.regMr(Buffer.alloc(4096), LW | MW_BIND);
  const w = pd.allocMw(MwType.TYPE_1);
  assert.equal(bind(pd, w, mr, mr.addr + 1024, 512, RW), null);
  const at = (va, len, acc = RW, qp = QP, p = pd, rkey = w.rkey) => remoteKeyOffset(ctx, qp, p, rkey, va, len, acc);
  assert.equal(at(mr.addr + 1024, 512), 1024);
  assert.equal(ctx._mrs.last, mr, 'the MR is left for the caller');
  assert.equal(at(mr.addr + 1100, 12), 1100);
  assert.equal(at(mr.addr + 1023, 2), MrCheck.BOUNDS, 'before the window, inside the MR');
  assert.equal(at(mr.addr + 1500, 37), MrCheck.BOUNDS, 'past the window, inside the MR');
  assert.equal(ctx._mrs.last, undefined);
  assert.equal(at(mr.addr + 1024, 8, RR), MrCheck.ACCESS, 'a right the window lacks');
  assert.equal(at(mr.addr + 1024, 8, RW, QP, pd2), MrCheck.PD_MISMATCH);
  assert.equal(at(mr.addr + 1024, 8, RW, QP, pd, incRkey(w.rkey)), MrCheck.INVALID_STAG, 'another key byte');
  assert.equal(at(mr.addr + 1024, 8, RW, OTHER_QP), 1024, 'type 1: any QP of the PD');
  assert.equal(at(0, 0), 0, 'zero length: no check');
  const old = w.rkey;
  assert.equal(bind(pd, w, mr, mr.addr, 64, RW | RR), null);
  assert.equal(at(mr.addr, 8, RW, QP, pd, old), MrCheck.INVALID_STAG, 'the rkey of the earlier binding');

  // Type 2, zero based: addresses are offsets into the window; only the QP it was bound through.
  const z = pd.allocMw(MwType.TYPE_2);
  assert.equal(bind(pd, z, mr, mr.addr + 2048, 256, RR | ZERO_BASED), null);
  assert.equal(remoteKeyOffset(ctx, QP, pd, z.rkey, 0, 256, RR), 2048);
  assert.equal(remoteKeyOffset(ctx, QP, pd, z.rkey, 255, 1, RR), 2303);
  assert.equal(remoteKeyOffset(ctx, QP, pd, z.rkey, 255, 2, RR), MrCheck.BOUNDS);
  assert.equal(remoteKeyOffset(ctx, QP, pd, z.rkey, mr.addr + 2048, 1, RR), MrCheck.BOUNDS, 'a VA is no offset');
  assert.equal(remoteKeyOffset(ctx, OTHER_QP, pd, z.rkey, 0, 8, RR), MrCheck.PD_MISMATCH, 'type 2 on another QP');
  // Invalidated: the rkey reaches nothing; invalidating again is harmless; type 1 cannot be.
  assert.equal(invalidateRkey(ctx, pd, z.rkey), 0);
  assert.equal(z.state, MwState.FREE);
  assert.equal(remoteKeyOffset(ctx, QP, pd, z.rkey, 0, 8, RR), MrCheck.INVALID_STAG);
  assert.equal(invalidateRkey(ctx, pd, z.rkey), 0);
  assert.equal(invalidateRkey(ctx, pd, w.rkey), MrCheck.ACCESS, 'type 1 (o10-37.2.26)');
  assert.equal(invalidateRkey(ctx, pd, incRkey(z.rkey)), MrCheck.INVALID_STAG, 'not its rkey');
  // Deallocated: gone.
  const rk = w.rkey;
  w.dealloc();
  assert.equal(remoteKeyOffset(ctx, QP, pd, rk, mr.addr, 8, RW), MrCheck.INVALID_STAG);
  z.dealloc();
  mr.dereg();
  pd.dealloc();
  pd2.dealloc();
});

test('incRkey: the key byte wraps, the index stays', () => {
  assert.equal(incRkey(0x1234_56ff), 0x1234_5600);
  assert.equal(incRkey(0xffff_ff7f), 0xffff_ff80);
  assert.equal(incRkey(0), 1);
});
