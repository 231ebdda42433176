// The native addon's ABI on the JS side (src/native/abi.ts): work requests encoded, completions
// and attributes decoded, in the layouts of native/src/addon.h — pure functions over plain typed
// arrays, no addon loaded.
import { test } from 'node:test';
import assert from 'node:assert/strict';

const abi = await import('../../../dist/native/abi.js');
const { QpState, WrOpcode, SendFlags, WcFlags, QpAttrMask } = await import('../../../dist/verbs/index.js');
const { W, S, WC, AH, QA, WR_WORDS, SGE_BASE, SGE_WORDS, SGE_MAX, WR_MAX, WR_STATUS_WORD, WC_WORDS } = abi;

/** A work-request scratch: the words and the doubles over the same memory, as the addon shares it. */
function scratch() {
  const ab = new ArrayBuffer((WR_STATUS_WORD + 4) * 4);
  return { w: new Uint32Array(ab), f: new Float64Array(ab) };
}
const sgeAt = ({ w, f }, slot) => {
  const o = SGE_BASE + slot * SGE_WORDS;
  return { addr: f[(o + S.ADDR) / 2], length: w[o + S.LENGTH], lkey: w[o + S.LKEY] };
};

test('the layouts fit together as addon.h lays them out', () => {
  assert.equal(SGE_BASE, WR_MAX * WR_WORDS);
  assert.equal(WR_STATUS_WORD, SGE_BASE + SGE_MAX * SGE_WORDS);
  assert.equal(W.RADDR % 2, 0, 'the remote address is an 8-byte aligned double');
  assert.equal((SGE_BASE + S.ADDR) % 2, 0);
  assert.equal(QA.WORDS, QA.AH + AH.WORDS);
  assert.equal(Math.max(...Object.values(WC)) + 1, WC_WORDS);
});

test('wr_id: numbers come back as numbers (bit 63 marks them), bigints as bigints', () => {
  const w = new Uint32Array(2);
  for (const id of [0, 1, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1, 0n, 5n, 2n ** 63n - 1n, 0x0123456789abcdefn]) {
    abi.putWrId(w, 0, id);
    assert.equal(abi.wrIdAt(w, 0), id, String(id));
  }
  abi.putWrId(w, 0, 2 ** 40 + 5);
  assert.deepEqual([...w], [5, 0x8000_0000 + 2 ** 8]);
});

test('send WRs: fields, SGE slots after the previous WR\'s, RDMA target or UD destination', () => {
  const sc = scratch();
  const s1 = { addr: 0x7f00_0000_1000, length: 10, lkey: 0x1100 };
  const s2 = { addr: 0x7f00_0000_2000, length: 20, lkey: 0x1100 };
  let next = abi.encodeSendWr(sc.w, sc.f, 0, 0, {
    wrId: 7, opcode: WrOpcode.RDMA_WRITE_WITH_IMM, sendFlags: SendFlags.SIGNALED, sgList: [s1, s2], immData: 0xcafebabe, rdma: { remoteAddr: 0x1234_5678_9abc, rkey: 0xdead },
  });
  assert.equal(next, 2);
  const o = 0;
  assert.deepEqual(
    [sc.w[o + W.OPCODE], sc.w[o + W.FLAGS], sc.w[o + W.NSGE], sc.w[o + W.SGE0], sc.w[o + W.IMM], sc.w[o + W.RKEY], sc.w[o + W.AH]],
    [WrOpcode.RDMA_WRITE_WITH_IMM, SendFlags.SIGNALED, 2, 0, 0xcafebabe, 0xdead, 0],
  );
  assert.equal(sc.f[(o + W.RADDR) / 2], 0x1234_5678_9abc);
  assert.deepEqual([sgeAt(sc, 0), sgeAt(sc, 1)], [s1, s2]);
  // A UD send: the AH's slot, QPN and Q_Key instead of an RDMA target.
  const ah = { _provider: { h: null, index: 3 } };
  next = abi.encodeSendWr(sc.w, sc.f, 1, next, { wrId: 8n, opcode: WrOpcode.SEND_WITH_INV, sgList: [s1], invalidateRkey: 0x55, ud: { ah, remoteQpn: 0x123, remoteQkey: 0x11 } });
  assert.equal(next, 3);
  const p = WR_WORDS;
  assert.deepEqual([sc.w[p + W.SGE0], sc.w[p + W.INV], sc.w[p + W.AH], sc.w[p + W.RQPN], sc.w[p + W.QKEY]], [2, 0x55, 3, 0x123, 0x11]);
  assert.equal(abi.wrIdAt(sc.w, p), 8n);
  // Without rdma the target is zeros (the C caller's zeroed wr.rdma).
  abi.encodeSendWr(sc.w, sc.f, 0, 0, { wrId: 1, opcode: WrOpcode.SEND, sgList: [] });
  assert.deepEqual([sc.w[W.RKEY], sc.f[W.RADDR / 2], sc.w[W.FLAGS], sc.w[W.IMM]], [0, 0, 0, 0]);
});

test('receive WRs: wr_id, SGE count and first slot, the SGEs', () => {
  const sc = scratch();
  const sg = [{ addr: 4096, length: 64, lkey: 9 }];
  assert.equal(abi.encodeRecvWr(sc.w, sc.f, 2, 5, { wrId: 42, sgList: sg }), 6);
  const o = 2 * WR_WORDS;
  assert.deepEqual([abi.wrIdAt(sc.w, o), sc.w[o + W.NSGE], sc.w[o + W.SGE0]], [42, 1, 5]);
  assert.deepEqual(sgeAt(sc, 5), sg[0]);
});

test('completions: immediate data or invalidated rkey by the flags; the UD fields unpacked', () => {
  const w = new Uint32Array(2 * WC_WORDS);
  const put = (i, k, v) => (w[i * WC_WORDS + WC[k]] = v);
  abi.putWrId(w, 0, 2 ** 33 + 9);
  put(0, 'STATUS', 0);
  put(0, 'OPCODE', 129);
  put(0, 'BYTE_LEN', 77);
  put(0, 'QP_NUM', 100);
  put(0, 'SRC_QP', 0x55);
  put(0, 'FLAGS', WcFlags.WITH_IMM);
  put(0, 'IMM_INV', 0xfeedface);
  put(0, 'PKEY_SLID', 3 | (4 << 16));
  put(0, 'SL_PATH', 5 | (6 << 8));
  abi.putWrId(w, WC_WORDS, 1n);
  put(1, 'STATUS', 5);
  put(1, 'FLAGS', WcFlags.WITH_INV);
  put(1, 'IMM_INV', 0x1234);
  const wc = abi.newWc();
  abi.decodeWc(w, 0, wc);
  assert.deepEqual({ ...wc }, { wrId: 2 ** 33 + 9, status: 0, opcode: 129, vendorErr: 0, byteLen: 77, qpNum: 100, srcQp: 0x55, wcFlags: WcFlags.WITH_IMM, immData: 0xfeedface, invalidatedRkey: 0, pkeyIndex: 3, slid: 4, sl: 5, dlidPathBits: 6 });
  abi.decodeWc(w, 1, wc);
  assert.deepEqual([wc.wrId, wc.status, wc.immData, wc.invalidatedRkey, wc.pkeyIndex], [1n, 5, 0, 0x1234, 0]);
});

test('address handles: encoded and decoded back; out-of-range fields named', () => {
  const v = new Float64Array(AH.WORDS);
  const gid = new Uint8Array(16);
  const dgid = Uint8Array.from({ length: 16 }, (_, i) => i + 1);
  const a = { dlid: 7, sl: 1, srcPathBits: 0, staticRate: 0, isGlobal: true, portNum: 1, grh: { dgid, flowLabel: 0x12345, sgidIndex: 2, hopLimit: 64, trafficClass: 0x20 } };
  assert.equal(abi.encodeAh(a, v, 0, gid), null);
  assert.deepEqual(gid, dgid);
  const back = abi.decodeAh(v, 0, gid);
  assert.deepEqual(back, a);
  assert.notEqual(back.grh.dgid, gid, 'a copy of the shared DGID buffer');
  assert.equal(abi.encodeAh({ ...a, isGlobal: false, grh: undefined }, v, 0, gid), null);
  assert.deepEqual([...gid], new Array(16).fill(0), 'no GRH: a zero DGID');
  for (const bad of [null, { ...a, sl: 256 }, { ...a, dlid: 0x10000 }, { ...a, grh: { ...a.grh, dgid: new Uint8Array(4) } }, { ...a, grh: { ...a.grh, flowLabel: 1 << 20 } }, { ...a, grh: { ...a.grh, hopLimit: -1 } }]) {
    assert.equal(typeof abi.encodeAh(bad, v, 0, gid), 'string', JSON.stringify(bad));
  }
});

test('QP attributes: the mask of what is present, encoded where ibv_qp_attr has it, decoded back', () => {
  const v = new Float64Array(QA.WORDS);
  const gid = new Uint8Array(16);
  const attr = { qpState: QpState.RTR, pathMtu: 3, destQpNum: 0x99, rqPsn: 0xabcdef, maxDestRdAtomic: 2, minRnrTimer: 12, ahAttr: { dlid: 0, sl: 0, srcPathBits: 0, staticRate: 0, isGlobal: false, portNum: 1 } };
  const m = abi.encodeQpAttr(attr, v, gid);
  assert.equal(m, QpAttrMask.STATE | QpAttrMask.PATH_MTU | QpAttrMask.DEST_QPN | QpAttrMask.RQ_PSN | QpAttrMask.MAX_DEST_RD_ATOMIC | QpAttrMask.MIN_RNR_TIMER | QpAttrMask.AV);
  assert.deepEqual([v[QA.STATE], v[QA.PATH_MTU], v[QA.DEST_QPN], v[QA.AH + AH.PORT]], [2, 3, 0x99, 1]);
  const back = abi.decodeQpAttr(v, gid);
  for (const k of ['qpState', 'pathMtu', 'destQpNum', 'rqPsn', 'maxDestRdAtomic', 'minRnrTimer']) assert.equal(back[k], attr[k], k);
  assert.deepEqual(back.ahAttr, attr.ahAttr);
  assert.equal(abi.encodeQpAttr({ cap: { maxSendWr: 1, maxRecvWr: 2, maxSendSge: 3, maxRecvSge: 4, maxInlineData: 5 } }, v, gid), QpAttrMask.CAP);
  assert.deepEqual([...v.subarray(QA.MAX_SEND_WR, QA.MAX_INLINE + 1)], [1, 2, 3, 4, 5]);
  assert.equal(v[QA.STATE], 0, 'zeroed first');
  for (const bad of [{ qpState: 'BOGUS' }, { curQpState: 'X' }, { qkey: -1 }, { destQpNum: 1.5 }, { cap: { maxSendWr: -1 } }, { ahAttr: { portNum: 300 } }]) {
    assert.equal(typeof abi.encodeQpAttr(bad, v, gid), 'string', JSON.stringify(bad));
  }
  assert.equal(abi.qpStateOfNum(3), QpState.RTS);
  assert.equal(abi.qpStateOfNum(99), QpState.ERR, 'a state the kernel adds later reads as ERR');
});

test('atomic WRs: remote address and rkey where an RDMA target goes, both 64-bit operands in their halves (addon.h W_CMP_*, W_SWAP_*)', () => {
  const s = scratch();
  const sgList = [{ addr: 0x1000, length: 8, lkey: 7 }];
  abi.encodeSendWr(s.w, s.f, 0, 0, { wrId: 1, opcode: WrOpcode.ATOMIC_CMP_AND_SWP, sgList, atomic: { remoteAddr: 0x7f00_0000_1008, rkey: 0xabcd, compareAdd: 0x0123456789abcdefn, swap: 0xfedcba9876543210n } });
  assert.equal(s.w[W.OPCODE], WrOpcode.ATOMIC_CMP_AND_SWP);
  assert.equal(s.f[W.RADDR / 2], 0x7f00_0000_1008);
  assert.equal(s.w[W.RKEY], 0xabcd);
  assert.deepEqual([s.w[W.CMP_LO], s.w[W.CMP_HI]], [0x89abcdef, 0x01234567]);
  assert.deepEqual([s.w[W.SWAP_LO], s.w[W.SWAP_HI]], [0x76543210, 0xfedcba98]);
  assert.equal(s.w[W.AH], 0, 'not a UD destination');
  // fetch-and-add of a number (a negative one wraps as uint64_t), no swap operand
  abi.encodeSendWr(s.w, s.f, 1, 1, { wrId: 2, opcode: WrOpcode.ATOMIC_FETCH_AND_ADD, sgList, atomic: { remoteAddr: 0x2000, rkey: 3, compareAdd: -1 } });
  const o = WR_WORDS;
  assert.deepEqual([s.w[o + W.CMP_LO], s.w[o + W.CMP_HI]], [0xffffffff, 0xffffffff]);
  assert.deepEqual([s.w[o + W.SWAP_LO], s.w[o + W.SWAP_HI]], [0, 0]);
  assert.equal(s.f[(o + W.RADDR) / 2], 0x2000);
  assert.equal(Math.max(...Object.values(W)) + 1, WR_WORDS, 'the operands end the WR');
});
