// The host path's ICRC offload (fwd-frame.ts `FwdFlag.ICRC_OFFLOAD`): a packet of one process's
// engines for a QP of another process of this host may leave its ICRC uncomputed, and says so in
// its forwarding frame. A frame with the flag is taken without the check; one without it is
// checked as a datagram from UDP is (a zero ICRC is an error, counted). A packet capture records
// an offloaded packet with its ICRC computed, as the wire would carry it. (What the frame's flags
// byte may hold: forward-frames.test.js, fwd-frame.test.js.)
import { wire, loDevice, udQp, pollN, Access, WcStatus, lib, LO_HEADERS, fwdFrame, handOver } from '../../../lib/roce.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FwdFlag } from '../../../../dist/transport/roce/fwd-frame.js';
import { NO_TSHARK, fields } from '../../../lib/capture.js';

const QKEY = 0x11111111;

/** A UD SEND of `text` to `qpn` with a valid ICRC, or its four ICRC bytes zeroed (`zeroIcrc`). */
function packet(qpn, text, zeroIcrc) {
  const pkt = Buffer.from(wire.encodeRocePacket({ opcode: wire.IbOpcode.UD_SEND_ONLY, destQp: qpn, psn: 0, deth: { qkey: QKEY, srcQp: 0x77 }, payload: Buffer.from(text) }, LO_HEADERS));
  if (zeroIcrc) pkt.fill(0, pkt.length - 4);
  return pkt;
}
const frame = fwdFrame;

/** A UD QP on rxe_lo with `n` receive slots of 256 bytes. */
function receiver(n = 8) {
  const ctx = loDevice().open();
  const pd = ctx.allocPd();
  const cq = ctx.createCq(32);
  const qp = udQp(pd, cq, QKEY);
  const buf = Buffer.alloc(256 * n);
  const mr = pd.regMr(buf, Access.LOCAL_WRITE);
  for (let i = 0; i < n; i++) qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr + 256 * i, length: 256, lkey: mr.lkey }] });
  /** The payload texts of the completions polled within `ms` (after the 40-byte GRH). */
  const texts = async (count, ms) => (await pollN(cq, count, ms)).map((wc) => (assert.equal(wc.status, WcStatus.SUCCESS), buf.toString('utf8', 256 * Number(wc.wrId) + 40, 256 * Number(wc.wrId) + wc.byteLen)));
  /** Destroyed in libibverbs' order (a live QP holds the event loop). */
  const close = () => {
    qp.destroy();
    mr.dereg();
    cq.destroy();
    pd.dealloc();
    ctx.close();
  };
  return { ctx, qp, texts, close };
}

test('a forwarded frame with the offload flag is taken without an ICRC; without the flag a zero ICRC is dropped and counted', async () => {
  const r = receiver();
  try {
    const qpn = r.qp.qpNum;
    const before = r.ctx.queryCounters();
    await handOver(qpn, [frame(packet(qpn, 'offloaded', true), FwdFlag.ICRC_OFFLOAD), frame(packet(qpn, 'zero icrc, no flag', true), 0), frame(packet(qpn, 'checked', false), 0)]);
    assert.deepEqual(await r.texts(2, 3000), ['offloaded', 'checked']);
    const c = r.ctx.queryCounters();
    assert.equal(c.rcvd_icrc_err_drop - before.rcvd_icrc_err_drop, 1, 'the unflagged frame with a zero ICRC is an ICRC error');
    assert.equal(c.fwd_rcvd - before.fwd_rcvd, 3);
    assert.equal(c.rcvd_pkts - before.rcvd_pkts, 2);
  } finally {
    r.close();
  }
});

test('a capture records an offloaded packet with its ICRC computed, as the wire would carry it', { skip: NO_TSHARK, timeout: 30_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-icrc-offload-'));
  const r = receiver();
  try {
    const file = join(dir, 'rxe_lo.pcapng');
    const qpn = r.qp.qpNum;
    const cap = lib.startCapture('rxe_lo', file);
    await handOver(qpn, [frame(packet(qpn, 'offloaded, captured', true), FwdFlag.ICRC_OFFLOAD)]);
    assert.deepEqual(await r.texts(1, 3000), ['offloaded, captured']);
    await cap.stop();
    const grams = fields(file, ['udp.payload'])
      .map(([hex]) => Buffer.from(hex, 'hex'))
      .filter((p) => p.length > 12 && wire.bthQpn(p, 0) === qpn);
    assert.equal(grams.length, 1, 'the forwarded packet was captured once');
    const p = grams[0];
    assert.equal(p.toString('latin1', 20, 20 + 19), 'offloaded, captured');
    assert.equal(wire.readIcrcValue(p, p.length - 4), wire.icrcCompute(LO_HEADERS, p, 0, p.length - 4), 'the ICRC the wire would carry');
  } finally {
    r.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
