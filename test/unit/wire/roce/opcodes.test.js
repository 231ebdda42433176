// The IB opcode table against an independent transcription of rdma_rxe's rxe_opcode.c (header
// order, lengths, kind bits), AETH credit codes and RNR timers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { roce } from '../../../../dist/wire/index.js';

const { IB_OPCODES, IbOpcode, Hdr, OpMask, HDR_LEN, IB_MAX_HDR_LEN } = roce;

// opcode: [headers after the BTH in wire order, kind flags] (rxe_opcode.c, ib_pack.h)
const K = {
  sf: 'PAYLOAD REQ RWR SEND START', sm: 'PAYLOAD REQ SEND MIDDLE', sl: 'PAYLOAD REQ COMP SEND END',
  so: 'PAYLOAD REQ COMP RWR SEND START END', wf: 'PAYLOAD REQ WRITE START', wm: 'PAYLOAD REQ WRITE MIDDLE',
  wl: 'PAYLOAD REQ WRITE END', wli: 'PAYLOAD REQ WRITE COMP RWR END', wo: 'PAYLOAD REQ WRITE START END',
  woi: 'PAYLOAD REQ WRITE COMP RWR START END', rr: 'REQ READ START END', at: 'REQ ATOMIC START END',
};
const sendWrite = (base, pre) => ({
  [base + 0]: [pre, K.sf], [base + 1]: [pre, K.sm], [base + 2]: [pre, K.sl], [base + 3]: [[...pre, 'IMMDT'], K.sl],
  [base + 4]: [pre, K.so], [base + 5]: [[...pre, 'IMMDT'], K.so], [base + 6]: [[...pre, 'RETH'], K.wf],
  [base + 7]: [pre, K.wm], [base + 8]: [pre, K.wl], [base + 9]: [[...pre, 'IMMDT'], K.wli],
  [base + 10]: [[...pre, 'RETH'], K.wo], [base + 11]: [[...pre, 'RETH', 'IMMDT'], K.woi],
});
const readAtomic = (base, req, rsp) => ({
  [base + 0x0c]: [[...req, 'RETH'], K.rr],
  [base + 0x0d]: [[...rsp, 'AETH'], 'PAYLOAD ACK START'], [base + 0x0e]: [rsp, 'PAYLOAD ACK MIDDLE'],
  [base + 0x0f]: [[...rsp, 'AETH'], 'PAYLOAD ACK END'], [base + 0x10]: [[...rsp, 'AETH'], 'PAYLOAD ACK START END'],
  [base + 0x11]: [[...rsp, 'AETH'], 'ACK START END'], [base + 0x12]: [[...rsp, 'AETH', 'ATMACK'], 'ACK START END'],
  [base + 0x13]: [[...req, 'ATMETH'], K.at], [base + 0x14]: [[...req, 'ATMETH'], K.at],
});
const EXPECT = {
  ...sendWrite(0x00, []), ...readAtomic(0x00, [], []),
  0x16: [['IETH'], K.sl], 0x17: [['IETH'], K.so], 0x1c: [['FETH', 'RETH'], 'REQ FLUSH START END'],
  0x1d: [['RETH'], 'PAYLOAD REQ ATOMIC_WRITE START END'],
  ...sendWrite(0x20, []),
  ...sendWrite(0x40, ['RDETH', 'DETH']), ...readAtomic(0x40, ['RDETH', 'DETH'], ['RDETH']),
  0x64: [['DETH'], K.so], 0x65: [['DETH', 'IMMDT'], K.so],
  0x81: [['CNP_RSVD'], 'CNP'],
};
const SIZE = { RDETH: 4, DETH: 8, RETH: 16, FETH: 4, AETH: 4, ATMETH: 28, ATMACK: 8, IMMDT: 4, IETH: 4, CNP_RSVD: 16 };

test('every defined opcode: headers in wire order, offsets, length and kind bits', () => {
  for (const [op, [hdrs, kinds]] of Object.entries(EXPECT)) {
    const info = IB_OPCODES[Number(op)];
    assert.equal(info.valid, true, info.name);
    assert.equal(info.opcode, Number(op));
    let off = 12;
    let mask = OpMask.BTH;
    const offsets = new Array(12).fill(-1);
    offsets[Hdr.BTH] = 0;
    for (const h of hdrs) {
      offsets[Hdr[h]] = off;
      off += SIZE[h];
      mask |= OpMask[h];
    }
    for (const k of kinds.split(' ')) mask |= OpMask[k];
    if (kinds.includes('PAYLOAD')) offsets[Hdr.PAYLOAD] = off;
    assert.equal(info.length, off, `${info.name} length`);
    assert.deepEqual([...info.offset], offsets, `${info.name} offsets`);
    assert.equal(info.mask, mask, `${info.name} mask`);
  }
});

test('rxe header lengths for the opcodes it sends (rxe_opcode.c .length)', () => {
  const rxe = {
    RC_SEND_FIRST: 12, RC_SEND_LAST_WITH_IMMEDIATE: 16, RC_RDMA_WRITE_FIRST: 28, RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: 32,
    RC_RDMA_READ_REQUEST: 28, RC_RDMA_READ_RESPONSE_MIDDLE: 12, RC_RDMA_READ_RESPONSE_ONLY: 16, RC_ACKNOWLEDGE: 16,
    RC_ATOMIC_ACKNOWLEDGE: 24, RC_COMPARE_SWAP: 40, RC_FETCH_ADD: 40, RC_SEND_ONLY_WITH_INVALIDATE: 16,
    RC_FLUSH: 32, RC_ATOMIC_WRITE: 28, UC_RDMA_WRITE_ONLY: 28, RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE: 44,
    RD_COMPARE_SWAP: 52, UD_SEND_ONLY: 20, UD_SEND_ONLY_WITH_IMMEDIATE: 24, CNP: 28,
  };
  for (const [name, len] of Object.entries(rxe)) {
    assert.equal(IB_OPCODES[IbOpcode[name]].length, len, name);
    assert.equal(IB_OPCODES[IbOpcode[name]].name, name);
  }
  // the atomic ACK carries the AETH before the AtomicAckETH; FLUSH the FETH before the RETH
  assert.equal(IB_OPCODES[IbOpcode.RC_ATOMIC_ACKNOWLEDGE].offset[Hdr.AETH], 12);
  assert.equal(IB_OPCODES[IbOpcode.RC_ATOMIC_ACKNOWLEDGE].offset[Hdr.ATMACK], 16);
  assert.equal(IB_OPCODES[IbOpcode.RC_FLUSH].offset[Hdr.FETH], 12);
  assert.equal(IB_OPCODES[IbOpcode.RC_FLUSH].offset[Hdr.RETH], 16);
  assert.equal(IB_OPCODES[IbOpcode.UD_SEND_ONLY_WITH_IMMEDIATE].offset[Hdr.IMMDT], 20);
});

test('all other opcodes are reserved, and the table has 256 frozen rows', () => {
  assert.equal(IB_OPCODES.length, 256);
  assert.ok(Object.isFrozen(IB_OPCODES));
  let max = 0;
  for (let op = 0; op < 256; op++) {
    const info = IB_OPCODES[op];
    assert.ok(Object.isFrozen(info) && Object.isFrozen(info.offset));
    assert.equal(info.opcode, op);
    if (op in EXPECT) {
      max = Math.max(max, info.length);
      continue;
    }
    assert.equal(info.valid, false, info.name);
    assert.equal(info.mask, 0);
    assert.equal(info.length, 0);
    assert.match(info.name, /^RESERVED_0x[0-9a-f]{2}$/);
  }
  assert.equal(IB_MAX_HDR_LEN, max);
  assert.equal(Object.keys(EXPECT).length, Object.keys(IbOpcode).length);
  for (const [name, op] of Object.entries(IbOpcode)) assert.equal(roce.ibOpcodeName(op), name);
  assert.equal(HDR_LEN.length, 12);
});

test('transport classes', () => {
  assert.equal(roce.ibOpcodeClass(IbOpcode.UC_SEND_ONLY), roce.IbTransport.UC);
  assert.equal(roce.ibOpcodeClass(IbOpcode.UD_SEND_ONLY_WITH_IMMEDIATE), roce.IbTransport.UD);
  assert.equal(roce.ibOpcodeClass(IbOpcode.CNP), roce.IbTransport.CNP);
  assert.equal(roce.ibOpcodeClass(IbOpcode.RD_FETCH_ADD), roce.IbTransport.RD);
});

test('AETH credit codes (IBTA table 45) and RNR timer codes (table 46)', () => {
  const { AETH_CREDIT_TABLE, aethCreditCode, aethCredits, RNR_TIMER_USEC, AethSyndrome } = roce;
  assert.equal(AETH_CREDIT_TABLE.length, 31);
  // 0..4, then alternating x1.5 / x1.33 steps: 6 8 12 16 ... 32768
  for (let c = 5; c < 31; c++) {
    const base = 4 << Math.floor((c - 5) / 2);
    assert.equal(AETH_CREDIT_TABLE[c], (c - 5) % 2 === 0 ? base * 1.5 : base * 2, `code ${c}`);
  }
  for (let c = 0; c < 31; c++) {
    assert.equal(aethCreditCode(AETH_CREDIT_TABLE[c]), c);
    assert.equal(aethCredits(c), AETH_CREDIT_TABLE[c]);
  }
  assert.equal(aethCreditCode(5), 4);
  assert.equal(aethCreditCode(100000), 30);
  assert.equal(aethCredits(31), Infinity);
  assert.equal(AethSyndrome.ACK_UNLIMITED & AethSyndrome.TYPE_MASK, AethSyndrome.ACK);
  assert.equal(AethSyndrome.NAK_REMOTE_ACCESS_ERROR & AethSyndrome.TYPE_MASK, AethSyndrome.NAK);
  assert.equal(RNR_TIMER_USEC.length, 32);
  assert.equal(RNR_TIMER_USEC[0], 655360);
  assert.equal(RNR_TIMER_USEC[1], 10);
  assert.equal(RNR_TIMER_USEC[14], 1280);
  assert.equal(RNR_TIMER_USEC[31], 491520);
  for (let c = 2; c < 32; c++) assert.ok(RNR_TIMER_USEC[c] > RNR_TIMER_USEC[c - 1]);
});
