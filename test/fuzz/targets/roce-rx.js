// The whole receive path of the soft RoCE device (rxe_lo): valid UD datagrams for a live QP,
// QP1 MADs and multicast, whole or mutated, fed to the device as its UDP sockets would (addresses
// and source port as a socket reports them).
//
// Invariants: nothing throws; every datagram ends in exactly one of `rcvd_pkts` and the
// `rcvd_*_drop` counters; a receive completion only comes from a datagram that passed the ICRC
// check, and carries exactly the bytes that datagram held after the 40-byte GRH area; the QP stays
// where it was (RTR).
import assert from 'node:assert/strict';
import { getDeviceList, QpType, QpState, Access, WcStatus, roce } from '../../../dist/index.js';
import { roceDevice } from '../../../dist/transport/roce/device.js';
import { IbOpcode, encodeRocePacket, encodeCmMad, encodeGsiPacket } from '../../../dist/wire/roce/index.js';
import { mutate, hexHead } from '../lib/mutate.js';

const QKEY = 0x01234567;
const NET = { family: 4, src: Uint8Array.of(127, 0, 0, 1), dst: Uint8Array.of(127, 0, 0, 1), sport: 49152, dport: Number(process.env.RDMACM_ROCE_PORT ?? 4791) };

function sum(c) {
  let n = c.rcvd_pkts;
  for (const [k, v] of Object.entries(c)) if (k.startsWith('rcvd_') && k.endsWith('_drop')) n += v;
  return n;
}

export default {
  name: 'roce-rx',
  about: 'the soft RoCE device receive path: UD datagrams, MADs and multicast, whole and mutated',
  budgetMs: 800,
  async setup() {
    const dev = getDeviceList().find((d) => d.name === 'rxe_lo');
    const ctx = dev.open();
    const pd = ctx.allocPd();
    const cq = ctx.createCq(4096);
    const buf = Buffer.alloc(1 << 16);
    const mr = pd.regMr(buf, Access.LOCAL_WRITE);
    const qp = pd.createQp({ qpType: QpType.UD, sendCq: cq, recvCq: cq, cap: { maxRecvWr: 1024, maxRecvSge: 1 } });
    qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: QKEY });
    qp.modify({ qpState: QpState.RTR });
    return { rd: roceDevice('rxe_lo'), qp, cq, buf, mr, posted: 0 };
  },
  async teardown(ctx) {
    ctx.qp.destroy();
  },
  run(rng, t, ctx) {
    const { rd, qp, cq, buf, mr } = ctx;
    while (ctx.posted < 64) {
      qp.postRecv({ wrId: ctx.posted, sgList: [{ addr: mr.addr + 1024 * (ctx.posted % 64), length: 1024, lkey: mr.lkey }] });
      ctx.posted++;
    }
    const kind = rng.int(3);
    const payload = Buffer.alloc(rng.int(600));
    for (let i = 0; i < payload.length; i++) payload[i] = rng.int(256);
    let valid;
    if (kind === 0) {
      const spec = { opcode: rng.int(2) ? IbOpcode.UD_SEND_ONLY : IbOpcode.UD_SEND_ONLY_WITH_IMMEDIATE, destQp: qp.qpNum, psn: rng.int(1 << 24), deth: { qkey: QKEY, srcQp: rng.int(1 << 24) }, immDt: rng.u32(), payload };
      valid = encodeRocePacket(spec, { ...NET, ipId: rng.int(65536) });
    } else if (kind === 1) {
      const mad = encodeCmMad({ kind: 'SIDR_REP', requestId: rng.u32(), status: rng.int(6), addInfoLength: 0, vendorId: 0, qpn: rng.int(1 << 24), serviceId: BigInt(rng.u32()), qkey: rng.u32(), addInfo: new Uint8Array(72), privateData: new Uint8Array(0) }, 1n);
      valid = encodeGsiPacket(mad, NET, { psn: 0 });
    } else {
      valid = encodeRocePacket({ opcode: IbOpcode.UD_SEND_ONLY, destQp: 0xffffff, psn: 0, deth: { qkey: QKEY, srcQp: 5 }, payload }, { ...NET, dst: Uint8Array.of(239, 1, 2, 3) });
    }
    const whole = rng.int(4) === 0;
    const { bytes, ops } = whole ? { bytes: valid, ops: ['none'] } : mutate(rng, valid);
    t.note(`${kind} ${ops.join(' ')}: ${hexHead(bytes)}`);
    const before = roce.counters('rxe_lo');
    const dst = kind === 2 ? '239.1.2.3' : '127.0.0.1';
    rd.rxDatagram(Buffer.from(bytes), { family: 4, src: '127.0.0.1', dst, srcPort: NET.sport, forwarded: false });
    const after = roce.counters('rxe_lo');
    const d = sum(after) - sum(before);
    assert.equal(d, 1, `one counter per datagram (got ${d})`);
    const wcs = cq.poll(8);
    if (wcs.length > 0) {
      assert.equal(wcs.length, 1);
      const w = wcs[0];
      ctx.posted--;
      assert.equal(after.rcvd_pkts - before.rcvd_pkts, 1, 'delivered only after the ICRC check');
      if (w.status === WcStatus.LOC_LEN_ERR) {
        t.count('too long');
        return;
      }
      assert.equal(w.status, WcStatus.SUCCESS);
      const at = 1024 * (Number(w.wrId) % 64);
      if (whole && kind === 0) assert.deepEqual(buf.subarray(at + 40, at + 40 + payload.length), payload);
      t.count('delivered');
    } else t.count('dropped');
    assert.equal(qp.state, QpState.RTR);
  },
  check(counts, cases) {
    if (cases < 500) return;
    assert.ok(counts.delivered > 0 && counts.dropped > 0, JSON.stringify(counts));
  },
};
