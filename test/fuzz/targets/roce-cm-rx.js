// The connected IB CM of the soft RoCE device (transport/roce/cm/: conn.ts, conn-rx.ts,
// rc-endpoint.ts) fed through the device's receive path:
// REQ, MRA, REJ, REP, RTU, DREQ and DREP MADs from a made-up peer at 127.0.0.2, whole or mutated,
// naming the communication IDs our CM really uses (read from the MADs it sends to that address)
// or made-up ones, while a listener takes requests and active ids connect towards the peer; the
// application side accepts, rejects, disconnects and destroys at random as the events come.
//
// Invariants: nothing throws, neither the receive path nor an event handler; every datagram is
// counted once (`rcvd_pkts` or one `rcvd_*_drop`); every event is one rdma_cm can report, with
// the status it allows (0, a negative errno, or a REJ reason for REJECTED); every MAD our CM sends
// decodes; every id the target makes can be destroyed.
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { once } from 'node:events';
import * as lib from '../../../dist/index.js';
import { roceDevice } from '../../../dist/transport/roce/device.js';
import { rxeReceive } from '../../../dist/transport/roce/recv.js';
import { encodeCmMad, decodeCmMad, encodeGsiPacket, decodeGsiPacket, encodeCmaPrivateData, emptyCmPath } from '../../../dist/wire/roce/index.js';
import { randomCmMessage } from '../../unit/wire/roce/roce-util.js';
import { mutate, hexHead } from '../lib/mutate.js';

const { createEventChannel, createId, PortSpace, CmEventType, serviceId, roce } = lib;
const PORT = Number(process.env.RDMACM_ROCE_PORT ?? 4791);
const LOCAL = '127.0.0.1';
const PEER = '127.0.0.2';
const V4 = (s) => Uint8Array.from(s.split('.').map(Number));
const GID = (s) => Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...V4(s)]);
const NET = { family: 4, src: V4(PEER), dst: V4(LOCAL), sport: PORT, dport: PORT };
const KINDS = ['REQ', 'REQ', 'MRA', 'REJ', 'REP', 'REP', 'RTU', 'RTU', 'DREQ', 'DREQ', 'DREP'];
/** Events and the statuses they may carry. */
const EVENTS = new Set(Object.values(CmEventType).filter((v) => typeof v === 'number'));
const MAX_IDS = 64;

function counted(c) {
  let n = c.rcvd_pkts;
  for (const [k, v] of Object.entries(c)) if (k.startsWith('rcvd_') && k.endsWith('_drop')) n += v;
  return n;
}

/** Remember a value in a bounded pool. */
function remember(pool, v, max = 32) {
  if (pool.includes(v)) return;
  pool.push(v);
  if (pool.length > max) pool.shift();
}

async function destroyId(ctx, id) {
  if (!ctx.ids.has(id)) return;
  ctx.ids.delete(id);
  try {
    if (id.qp) id.destroyQp();
  } catch {
    // the QP is gone already
  }
  try {
    await id.destroy();
  } catch (e) {
    ctx.error ??= e;
  }
}

/** The application: acts on every event, at random (the case's generator). */
async function pump(ctx) {
  for (;;) {
    let ev;
    try {
      ev = await ctx.ch.getEvent(ctx.stop.signal);
    } catch {
      return;
    }
    try {
      await onEvent(ctx, ev);
    } catch (e) {
      ctx.error ??= e;
    }
  }
}

async function onEvent(ctx, ev) {
  const rng = ctx.rng;
  const E = CmEventType;
  ctx.events.push(ev.event);
  if (!EVENTS.has(ev.event)) throw new Error(`unknown event ${ev.event}`);
  const st = ev.status ?? 0;
  if (ev.event === E.REJECTED) assert.ok(Number.isInteger(st) && st >= 0 && st <= 0xffff, `REJECTED with status ${st}`); // the REJ reason, 16 bits
  else assert.ok(Number.isInteger(st) && st <= 0, `${lib.rdmaEventStr(ev.event)} with status ${st}`);
  const id = ev.id;
  if (ev.event === E.CONNECT_REQUEST) ctx.ids.add(id);
  ev.ack();
  // an id being destroyed (its destroy waits for this acknowledgement) is left alone
  if (ctx.closing || !ctx.ids.has(id)) return;
  ctx.busy.add(id);
  try {
    await act(ctx, ev, id, rng);
  } finally {
    ctx.busy.delete(id);
  }
}

async function act(ctx, ev, id, rng) {
  const E = CmEventType;
  switch (ev.event) {
    case E.CONNECT_REQUEST: {
      const r = rng.int(4);
      if (r === 0 || ctx.ids.size > MAX_IDS) await destroyId(ctx, id);
      else if (r === 1) {
        id.reject(Buffer.from('no'));
        await destroyId(ctx, id);
      }
      else if (r === 2) {
        id.createQp(null, { cap: { maxSendWr: 2, maxRecvWr: 2 } });
        await id.accept({ privateData: Buffer.from('yes') });
      } // else: left pending, answered with MRAs while the peer repeats its REQ
      break;
    }
    case E.ADDR_RESOLVED:
      await id.resolveRoute(1000);
      break;
    case E.ROUTE_RESOLVED:
      id.createQp(null, { cap: { maxSendWr: 2, maxRecvWr: 2 } });
      await id.connect({ privateData: Buffer.from('fuzz') });
      break;
    case E.ESTABLISHED:
      if (rng.chance(0.3)) await id.disconnect();
      break;
    case E.CONNECT_RESPONSE:
      if (rng.chance(0.5)) id.establish();
      else await destroyId(ctx, id);
      break;
    case E.DISCONNECTED:
      if (rng.chance(0.5)) await id.disconnect().catch(() => {});
      else await destroyId(ctx, id);
      break;
    case E.REJECTED:
    case E.UNREACHABLE:
    case E.CONNECT_ERROR:
    case E.TIMEWAIT_EXIT:
    case E.ADDR_ERROR:
    case E.ROUTE_ERROR:
      await destroyId(ctx, id);
      break;
    default:
      break;
  }
}

/** A MAD of `kind` from the peer: fields random, IDs and service often the ones in play. */
function madFor(rng, ctx, kind) {
  const m = randomCmMessage(() => rng.u32(), kind);
  const ours = ctx.ourIds.length > 0 && rng.chance(0.8) ? rng.pick(ctx.ourIds) : rng.chance(0.5) ? 0 : rng.u32();
  const theirs = ctx.peerIds.length > 0 && rng.chance(0.7) ? rng.pick(ctx.peerIds) : rng.u32();
  m.localCommId = theirs;
  if ('remoteCommId' in m) m.remoteCommId = ours;
  if (kind === 'REQ') {
    remember(ctx.peerIds, theirs);
    m.serviceId = rng.chance(0.85) ? ctx.sid : serviceId(PortSpace.TCP, rng.int(65536));
    m.transportType = rng.chance(0.9) ? 0 : rng.int(4);
    m.pathMtu = rng.chance(0.9) ? 3 : rng.int(16);
    m.primaryPath = { ...emptyCmPath(), ...m.primaryPath, remoteGid: rng.chance(0.9) ? GID(LOCAL) : m.primaryPath.remoteGid, localGid: GID(PEER) };
    if (rng.chance(0.9)) {
      const pd = encodeCmaPrivateData({ version: 0, ipVersion: 4, srcPort: rng.int(65536), src: V4(PEER), dst: V4(LOCAL) }, Buffer.alloc(rng.int(57)));
      m.privateData = pd;
    }
  }
  if (kind === 'REJ') m.messageRejected = rng.int(4);
  if (kind === 'MRA') {
    m.messageMraed = rng.int(4);
    m.serviceTimeout = rng.int(12);
  }
  if (kind === 'DREQ' && rng.chance(0.7) && ctx.qpns.length > 0) m.remoteQpn = rng.pick(ctx.qpns);
  return m;
}

export default {
  name: 'roce-cm-rx',
  about: 'connected IB CM MADs (REQ MRA REJ REP RTU DREQ DREP) through the receive path into live listeners and connections',
  budgetMs: 700,
  caseTimeoutMs: 10000,
  async setup() {
    roce.configureRcCm({ cmTimeoutMs: 40, cmRetries: 1, timewaitMs: 20 });
    const ch = createEventChannel();
    const port = 20000 + Math.floor(Math.random() * 40000);
    const l = createId(ch, 'L', PortSpace.TCP, { device: 'rxe_lo' });
    l.bindAddr({ address: LOCAL, port });
    await l.listen(16);
    // What our CM sends to the peer: the communication IDs and QPNs in play.
    const sink = dgram.createSocket('udp4');
    sink.bind(PORT, PEER);
    await once(sink, 'listening');
    const ctx = { ch, l, sink, sid: serviceId(PortSpace.TCP, port), rd: roceDevice('rxe_lo'), ids: new Set(), busy: new Set(), ourIds: [], peerIds: [], qpns: [], tids: [], events: [], error: null, stop: new AbortController(), closing: false, rng: null, sent: 0 };
    sink.on('message', (msg) => {
      const g = decodeGsiPacket(msg, { net: { ...NET, src: V4(LOCAL), dst: V4(PEER) } });
      if (!g.ok) return;
      let mad;
      try {
        mad = decodeCmMad(g.gsi.mad);
      } catch {
        ctx.error ??= new Error(`our CM sent a MAD that does not decode: ${hexHead(g.gsi.mad)}`);
        return;
      }
      ctx.sent++;
      remember(ctx.ourIds, mad.msg.localCommId);
      remember(ctx.tids, mad.hdr.tid, 8);
      if (mad.msg.kind === 'REQ' || mad.msg.kind === 'REP') remember(ctx.qpns, mad.msg.localQpn, 8);
    });
    ctx.pumping = pump(ctx);
    return ctx;
  },
  async teardown(ctx) {
    ctx.closing = true;
    // (bounded: after a failed case an id may wait for an event nobody acknowledges)
    const soon = (p) => Promise.race([p, new Promise((r) => setTimeout(r, 300))]);
    for (const id of [...ctx.ids]) await soon(destroyId(ctx, id));
    await soon(ctx.l.destroy());
    ctx.stop.abort();
    await ctx.pumping;
    ctx.ch.destroy();
    ctx.sink.close();
  },
  async run(rng, t, ctx) {
    ctx.rng = rng;
    if (ctx.error) throw ctx.error;
    // Connections are not kept for ever: the oldest idle id goes when there are many.
    if (ctx.ids.size > 24) {
      const idle = [...ctx.ids].find((x) => !ctx.busy.has(x));
      if (idle) await destroyId(ctx, idle);
    }
    // Now and then an active id towards the peer (its REQ gives the fuzzer an ID to answer).
    if (rng.chance(0.05) && ctx.ids.size < MAX_IDS) {
      const id = createId(ctx.ch, null, PortSpace.TCP, { device: 'rxe_lo' });
      ctx.ids.add(id);
      await id.resolveAddr({ address: LOCAL, port: 0 }, { address: PEER, port: 1 + rng.int(65535) }, 1000);
      t.count('connect');
    }
    const kind = rng.pick(KINDS);
    const msg = madFor(rng, ctx, kind);
    const tid = ctx.tids.length > 0 && rng.chance(0.5) ? rng.pick(ctx.tids) : (BigInt(rng.u32()) << 32n) | BigInt(rng.u32());
    const mad = Buffer.from(encodeCmMad(msg, tid));
    const whole = rng.chance(0.6);
    let bytes = mad;
    let ops = ['none'];
    if (!whole) {
      ({ bytes, ops } = mutate(rng, mad, { fields: [{ off: 0, size: 4 }, { off: 16, size: 2 }, { off: 24, size: 4 }, { off: 28, size: 4 }, { off: 32, size: 8 }] }));
      if (bytes.length !== 256) bytes = Buffer.concat([bytes, Buffer.alloc(256)]).subarray(0, rng.chance(0.8) ? 256 : rng.int(256));
    }
    const pkt = bytes.length === 256 ? Buffer.from(encodeGsiPacket(bytes, NET, { psn: rng.int(1 << 24) })) : bytes;
    t.note(`${kind} ${ops.join(' ')}: ${hexHead(bytes)}`);
    const before = ctx.rd.counters.snapshot();
    rxeReceive(ctx.rd, pkt, { family: 4, src: PEER, dst: LOCAL, srcPort: PORT, forwarded: false });
    const after = ctx.rd.counters.snapshot();
    assert.equal(counted(after) - counted(before), 1, 'one counter per datagram');
    t.count(after.rcvd_mad_unroutable_drop > before.rcvd_mad_unroutable_drop ? 'dropped by the CM' : after.rcvd_pkts > before.rcvd_pkts ? `${kind} taken` : 'dropped by the device');
    // Let the events, the replies and the timers run.
    await new Promise((r) => setImmediate(r));
    if (rng.chance(0.05)) await new Promise((r) => setTimeout(r, 5));
    if (ctx.error) throw ctx.error;
    if (ctx.events.length > 0) {
      for (const e of ctx.events.splice(0)) t.count(lib.rdmaEventStr(e));
    }
  },
  check(counts, cases) {
    if (cases < 1500) return;
    for (const k of ['REQ taken', 'REP taken', 'dropped by the CM', 'RDMA_CM_EVENT_CONNECT_REQUEST', 'RDMA_CM_EVENT_ESTABLISHED']) assert.ok(counts[k] > 0, `no case ended in ${k}: ${JSON.stringify(counts)}`);
  },
};
