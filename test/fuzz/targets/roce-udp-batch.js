// The soft RoCE device's UDP receive path through its real socket (rxe_lo, whichever path the
// process uses: the addon's recvmmsg batches or Node's dgram, RDMACM_ROCE_IO): bursts of 1 to 48
// datagrams, valid UD SENDs and mutated ones mixed, sent back to back from a socket at 127.0.0.2
// (a remote peer to the device), so that one receive batch holds good and malformed datagrams.
//
// Invariants: nothing throws; every datagram of a burst ends in exactly one of `rcvd_pkts` and
// the `rcvd_*_drop` counters (none lost, none counted twice); a receive completion comes only from
// a datagram that passed the checks, and each valid datagram's payload arrives once.
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { once } from 'node:events';
import { getDeviceList, QpType, QpState, Access, WcStatus, roce } from '../../../dist/index.js';
import { IbOpcode, encodeRocePacket } from '../../../dist/wire/roce/index.js';
import { mutate } from '../lib/mutate.js';

const QKEY = 0x0badcafe;
const PORT = Number(process.env.RDMACM_ROCE_PORT ?? 4791);
const SLOT = 1024;
const SLOTS = 256;

function sum(c) {
  let n = c.rcvd_pkts;
  for (const [k, v] of Object.entries(c)) if (k.startsWith('rcvd_') && k.endsWith('_drop')) n += v;
  return n;
}

async function waitFor(pred, ms) {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 2));
  }
  return true;
}

export default {
  name: 'roce-udp-batch',
  about: 'the soft RoCE device receive path through its UDP socket: bursts mixing valid and mutated UD datagrams in one batch',
  budgetMs: 1000,
  async setup() {
    const dev = getDeviceList().find((d) => d.name === 'rxe_lo');
    const ctx = dev.open();
    const pd = ctx.allocPd();
    const cq = ctx.createCq(1024);
    const buf = Buffer.alloc(SLOT * SLOTS);
    const mr = pd.regMr(buf, Access.LOCAL_WRITE);
    const qp = pd.createQp({ qpType: QpType.UD, sendCq: cq, recvCq: cq, cap: { maxRecvWr: SLOTS, maxRecvSge: 1 } });
    qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: QKEY });
    qp.modify({ qpState: QpState.RTR });
    const sock = dgram.createSocket('udp4');
    sock.bind(0, '127.0.0.2');
    await once(sock, 'listening');
    const ctxOut = { qp, cq, buf, mr, sock, sport: sock.address().port, next: 0, posted: 0 };
    return ctxOut;
  },
  async teardown(ctx) {
    ctx.sock.close();
    ctx.qp.destroy();
  },
  async run(rng, t, ctx) {
    const { qp, cq, buf, mr, sock } = ctx;
    while (ctx.posted < SLOTS) {
      const id = ctx.next++;
      qp.postRecv({ wrId: id, sgList: [{ addr: mr.addr + SLOT * (id % SLOTS), length: SLOT, lkey: mr.lkey }] });
      ctx.posted++;
    }
    const net = { family: 4, src: Uint8Array.of(127, 0, 0, 2), dst: Uint8Array.of(127, 0, 0, 1), sport: ctx.sport, dport: PORT };
    const n = 1 + rng.int(48);
    const valid = new Map();
    const burst = [];
    for (let i = 0; i < n; i++) {
      const payload = Buffer.alloc(8 + rng.int(400), rng.int(256));
      payload.writeUInt32BE(i, 0);
      payload.writeUInt32BE(rng.u32(), 4);
      const pkt = Buffer.from(encodeRocePacket({ opcode: IbOpcode.UD_SEND_ONLY, destQp: qp.qpNum, psn: i, deth: { qkey: QKEY, srcQp: 0x42 }, payload }, { ...net, ipId: 0 }));
      if (rng.int(3) === 0) {
        burst.push(pkt);
        valid.set(payload.toString('hex'), 0);
      } else burst.push(mutate(rng, pkt).bytes);
    }
    t.note(`burst of ${n}, ${valid.size} valid`);
    const before = sum(roce.counters('rxe_lo'));
    for (const b of burst) sock.send(b, PORT, '127.0.0.1');
    // A loaded runner can take seconds to hand a burst through; nothing waits once all are counted.
    const arrived = await waitFor(() => sum(roce.counters('rxe_lo')) - before >= n, 15_000);
    await new Promise((r) => setTimeout(r, 5));
    const d = sum(roce.counters('rxe_lo')) - before;
    assert.ok(arrived, `every datagram of the burst counted (${d} of ${n})`);
    assert.equal(d, n, 'one counter per datagram');
    for (const w of cq.poll(1024)) {
      ctx.posted--;
      if (w.status !== WcStatus.SUCCESS) {
        t.count('not success');
        continue;
      }
      const at = SLOT * (Number(w.wrId) % SLOTS) + 40;
      const key = buf.toString('hex', at, at + w.byteLen - 40);
      if (valid.has(key)) {
        assert.equal(valid.get(key), 0, 'a valid datagram delivered once');
        valid.set(key, 1);
        t.count('valid delivered');
      } else t.count('mutated delivered');
    }
    for (const [k, v] of valid) assert.equal(v, 1, `valid datagram ${k.slice(0, 16)} delivered`);
    assert.equal(qp.state, QpState.RTR);
  },
  check(counts, cases) {
    if (cases < 20) return;
    assert.ok(counts['valid delivered'] > 0, JSON.stringify(counts));
  },
};
