// The native backend's data path against C: a 64 B SEND/RECV ping-pong between two RC QPs of
// this process on a kernel RDMA device (siw0, rxe0, mlx5_0 ...), connected through our rdma_cm
// API (librdmacm underneath), run three ways on the same QPs and memory:
//   - verbs: the public API, qp.postRecv / qp.postSend / cq.pollInto with a WR object per post
//     and a reused Wc object per completion (what an application writes);
//   - addon: the same addon calls with the WRs encoded once (no verbs layer: the floor of what
//     crossing into the addon costs, to tell the verbs layer's share from N-API's);
//   - C: the same libibverbs calls in the same order in a C loop (the addon's cLoopPingPong),
//     busy-polling both CQs, as the JS loops do;
// and a stream of SENDs in lists of BATCH (posted as WR objects, and as lists prepared once with
// qp.prepareSend / prepareRecv), polled up to BATCH at a time, against C's cLoopStream.
// Rounds alternate the three (the order rotating each round) after a warm-up. Each row prints
// the median time per round trip, the spread of the rounds (min-max), the process's CPU time
// per round trip (user + system, process.cpuUsage) and, for the JS rows, the median of the
// rounds' ratios to C's round (each ratio taken within one round, under the same conditions).
// Without a native device it says so and exits 0.
//
// Env: BENCH_NATIVE_ITERS (round trips per round, default 20000), BENCH_NATIVE_ROUNDS (5),
// BENCH_NATIVE_WARMUP (untimed JS round trips first, 10000),
// BENCH_NATIVE_SIZE (64), BENCH_NATIVE_DEVICE (a device name; default: the first native one),
// BENCH_JSON=1 (one JSON line instead of the table).
import { Access, native, PortSpace, SendFlags, WrOpcode, createId, getDeviceList } from '../dist/index.js';
import { loadBinding, scratchBuffers } from '../dist/native/binding.js';
import { encodeRecvWr, encodeSendWr, SGE_BASE, SGE_WORDS, WR_COUNT_WORD, WR_SLOT_WORD, WR_WORDS } from '../dist/native/abi.js';

const ITERS = Number(process.env.BENCH_NATIVE_ITERS || 20000);
const ROUNDS = Number(process.env.BENCH_NATIVE_ROUNDS || 5);
/** Untimed JS round trips first: V8 compiles the data path (BENCH_NATIVE_WARMUP). */
const WARMUP = Number(process.env.BENCH_NATIVE_WARMUP || 10000);
const SIZE = Number(process.env.BENCH_NATIVE_SIZE || 64);
/** Messages per posted list and per poll in the stream rows (BENCH_NATIVE_BATCH, at most 32). */
const BATCH = Number(process.env.BENCH_NATIVE_BATCH || 16);
const PORT = 7790 + (process.pid % 100);
/** The verbs row's target against C (issue: the native backend at C's speed). */
const TARGET = 1.2;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function connectPair(dev) {
  const a4 = dev.info.addresses.find((a) => a.family === 'IPv4') ?? dev.info.addresses[0];
  if (!a4) throw new Error(`${dev.name} has no address`);
  const address = a4.address;
  const listener = createId(null, null, PortSpace.TCP);
  listener.bindAddr({ address, port: PORT });
  await listener.listen(1);
  const ctx = listener.verbs;
  const pd = ctx.allocPd();
  const cqA = ctx.createCq(2 * BATCH + 4);
  const cqB = ctx.createCq(2 * BATCH + 4);
  const cap = { maxSendWr: BATCH + 2, maxRecvWr: BATCH + 2, maxSendSge: 1, maxRecvSge: 1 };
  const client = createId(null, null, PortSpace.TCP);
  await client.resolveAddr(null, { address, port: PORT }, 5000);
  await client.resolveRoute(5000);
  const qpA = client.createQp(pd, { sendCq: cqA, recvCq: cqA, cap });
  const connecting = client.connect({ responderResources: 1, initiatorDepth: 1 });
  const child = await listener.getRequest();
  const qpB = child.createQp(pd, { sendCq: cqB, recvCq: cqB, cap });
  await child.accept({ responderResources: 1, initiatorDepth: 1 });
  await connecting;
  const buf = Buffer.alloc(8192);
  const mr = pd.regMr(buf, Access.LOCAL_WRITE);
  const close = async () => {
    await client.disconnect().catch(() => {});
    client.destroyQp();
    child.destroyQp();
    await client.destroy();
    await child.destroy();
    await listener.destroy();
    mr.dereg();
    cqA.destroy();
    cqB.destroy();
    pd.dealloc();
  };
  return { qpA, qpB, cqA, cqB, mr, close };
}

/** The four WRs of the ping-pong, as objects. */
function wrsOf(mr) {
  const sa = [{ addr: mr.addr, length: SIZE, lkey: mr.lkey }];
  const sb = [{ addr: mr.addr + 4096, length: SIZE, lkey: mr.lkey }];
  return {
    ra: { wrId: 1, sgList: sa },
    rb: { wrId: 2, sgList: sb },
    xa: { wrId: 3, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: sa },
    xb: { wrId: 4, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: sb },
  };
}

/** The verbs loop: the calls cLoopPingPong makes, through the public API. */
function verbsLoop(p, iters) {
  const { qpA, qpB, cqA, cqB } = p;
  const { ra, rb, xa, xb } = p.wrs;
  const wcs = [];
  const one = (cq) => {
    while (cq.pollInto(wcs, 1) === 0);
    if (wcs[0].status !== 0) throw new Error(`completion status ${wcs[0].status}`);
  };
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iters; i++) {
    qpB.postRecv(rb);
    qpA.postRecv(ra);
    qpA.postSend(xa);
    one(cqB);
    one(cqA);
    qpB.postSend(xb);
    one(cqA);
    one(cqB);
  }
  return Number(process.hrtime.bigint() - t0);
}

/**
 * The same addon calls with no verbs layer: each WR encoded once into a saved copy of the WR
 * scratch and copied back before its post (the scratch is shared by every call).
 */
function addonLoop(b, p, iters) {
  const { qpA, qpB, cqA, cqB } = p;
  const s = scratchBuffers();
  const saved = {};
  for (const [k, wr] of Object.entries(p.wrs)) {
    s.wr.fill(0);
    (k[0] === 'r' ? encodeRecvWr : encodeSendWr)(s.wr, s.wrF64, 0, 0, wr);
    saved[k] = s.wr.slice();
  }
  const w = s.wr;
  const wc = s.wc;
  // Only the WR's words and its one SGE's change between posts.
  const put = (x) => {
    for (let i = 0; i < WR_WORDS; i++) w[i] = x[i];
    for (let i = SGE_BASE; i < SGE_BASE + SGE_WORDS; i++) w[i] = x[i];
  };
  // The calls by slot, as the verbs layer makes them: the QP or CQ and the count in the scratch.
  const [sA, sB, cA, cB] = [qpA._h, qpB._h, cqA._h, cqB._h].map((h) => b.dataSlot(h));
  const recv = (slot) => {
    w[WR_SLOT_WORD] = slot;
    w[WR_COUNT_WORD] = 1;
    b.postRecvSlot();
  };
  const send = (slot) => {
    w[WR_SLOT_WORD] = slot;
    w[WR_COUNT_WORD] = 1;
    b.postSendSlot();
  };
  const one = (slot) => {
    do {
      w[WR_SLOT_WORD] = slot;
      w[WR_COUNT_WORD] = 1;
    } while (b.pollCqSlot() === 0);
    if (wc[2] !== 0) throw new Error(`completion status ${wc[2]}`);
  };
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iters; i++) {
    put(saved.rb);
    recv(sB);
    put(saved.ra);
    recv(sA);
    put(saved.xa);
    send(sA);
    one(cB);
    one(cA);
    put(saved.xb);
    send(sB);
    one(cA);
    one(cB);
  }
  return Number(process.hrtime.bigint() - t0);
}

/**
 * The verbs loop of the stream: each iteration B posts BATCH receives as one list, A posts BATCH
 * signaled SENDs as one list, then both CQs are polled for BATCH completions, up to BATCH per
 * pollInto into reused Wc objects (cLoopStream's calls).
 */
function streamLoop(p, iters) {
  const { recvs, sends, drain } = streamWork(p);
  const { qpA, qpB, cqA, cqB } = p;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iters; i++) {
    qpB.postRecv(recvs);
    qpA.postSend(sends);
    drain(cqB);
    drain(cqA);
  }
  return Number(process.hrtime.bigint() - t0);
}

/** The stream with both lists prepared once (qp.prepareRecv / prepareSend, posted by qp.postPrepared). */
function preparedStreamLoop(p, iters) {
  const work = streamWork(p);
  const { qpA, qpB, cqA, cqB } = p;
  const recvs = qpB.prepareRecv(work.recvs);
  const sends = qpA.prepareSend(work.sends);
  const drain = work.drain;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iters; i++) {
    qpB.postPrepared(recvs);
    qpA.postPrepared(sends);
    drain(cqB);
    drain(cqA);
  }
  return Number(process.hrtime.bigint() - t0);
}

/** The stream's lists (B's BATCH receives, A's BATCH signaled SENDs) and the drain of BATCH completions from a CQ. */
function streamWork(p) {
  const { mr } = p;
  const sa = [{ addr: mr.addr, length: SIZE, lkey: mr.lkey }];
  const sb = [{ addr: mr.addr + 4096, length: SIZE, lkey: mr.lkey }];
  const recvs = Array.from({ length: BATCH }, (_, i) => ({ wrId: 100 + i, sgList: sb }));
  const sends = Array.from({ length: BATCH }, (_, i) => ({ wrId: 200 + i, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: sa }));
  const wcs = [];
  const drain = (cq) => {
    for (let want = BATCH; want > 0; ) {
      const n = cq.pollInto(wcs, want);
      for (let i = 0; i < n; i++) if (wcs[i].status !== 0) throw new Error(`completion status ${wcs[i].status}`);
      want -= n;
    }
  };
  return { recvs, sends, drain };
}

function cStreamLoop(b, p, iters) {
  const { qpA, qpB, cqA, cqB, mr } = p;
  const ns = b.cLoopStream(qpA._h, cqA._h, qpB._h, cqB._h, Float64Array.of(mr.addr, mr.addr + 4096, mr.lkey, mr.lkey, SIZE, iters, BATCH));
  if (ns < 0) throw new Error(`cLoopStream: errno ${-ns}`);
  return ns;
}

function cLoop(b, p, iters) {
  const { qpA, qpB, cqA, cqB, mr } = p;
  const ns = b.cLoopPingPong(qpA._h, cqA._h, qpB._h, cqB._h, Float64Array.of(mr.addr, mr.addr + 4096, mr.lkey, mr.lkey, SIZE, iters));
  if (ns < 0) throw new Error(`cLoopPingPong: errno ${-ns}`);
  return ns;
}

/** One timed run of `fn` over `iters` iterations of `ops` operations: [wall ns, CPU ns] per operation. */
function timed(fn, iters, ops) {
  const c0 = process.cpuUsage();
  const ns = fn(iters);
  const c = process.cpuUsage(c0);
  return [ns / (iters * ops), ((c.user + c.system) * 1000) / (iters * ops)];
}

/**
 * The loops, by group: each group's JS rows are compared with its C row, round by round. `ops`
 * is what one iteration does (a round trip; BATCH messages), `unit` how the table names it.
 */
function groupsOf(b, p) {
  const streamIters = Math.max(1, Math.ceil((2 * ITERS) / BATCH));
  return [
    { name: 'ping-pong', unit: 'round trip', iters: ITERS, ops: 1, c: 'c', loops: { verbs: (n) => verbsLoop(p, n), addon: (n) => addonLoop(b, p, n), c: (n) => cLoop(b, p, n) } },
    { name: 'stream', unit: 'message', iters: streamIters, ops: BATCH, c: 'cStream', loops: { verbsStream: (n) => streamLoop(p, n), preparedStream: (n) => preparedStreamLoop(p, n), cStream: (n) => cStreamLoop(b, p, n) } },
  ];
}

async function main() {
  const want = process.env.BENCH_NATIVE_DEVICE;
  const dev = getDeviceList().find((d) => d.provider === native.PROVIDER && (!want || d.name === want));
  const b = loadBinding();
  if (!dev || !b) {
    const st = native.addonStatus();
    console.log(`native data path: skipped (${!st.loaded ? `native addon not loaded: ${st.reason}` : 'no kernel RDMA device'})`);
    return;
  }
  if (!(BATCH >= 1 && BATCH <= 32)) throw new Error(`BENCH_NATIVE_BATCH ${BATCH}: 1 to 32`);
  const p = await connectPair(dev);
  p.wrs = wrsOf(p.mr);
  const groups = groupsOf(b, p);
  const samples = {};
  try {
    // Warm-up: V8 compiles the JS paths; every loop touches the same QPs and memory.
    for (const g of groups) {
      for (const [k, fn] of Object.entries(g.loops)) {
        fn(k === g.c ? Math.max(1, Math.min(g.iters, Math.ceil(2000 / g.ops))) : Math.max(1, Math.ceil(WARMUP / g.ops)));
        samples[k] = { ns: [], cpuNs: [] };
      }
    }
    // Rounds: within each group the loops run back to back, the order rotating every round.
    for (let r = 0; r < ROUNDS; r++) {
      for (const g of groups) {
        const names = Object.keys(g.loops);
        for (let k = 0; k < names.length; k++) {
          const name = names[(r + k) % names.length];
          const [ns, cpu] = timed(g.loops[name], g.iters, g.ops);
          samples[name].ns.push(ns);
          samples[name].cpuNs.push(cpu);
        }
      }
    }
  } finally {
    await p.close();
  }
  const out = { device: dev.name, size: SIZE, batch: BATCH, iters: ITERS, rounds: ROUNDS, warmup: WARMUP, target: TARGET, rows: {} };
  for (const g of groups) {
    const c = samples[g.c];
    for (const k of Object.keys(g.loops)) {
      const row = samples[k];
      const ratios = k === g.c ? null : row.ns.map((x, i) => x / c.ns[i]);
      out.rows[k] = {
        group: g.name,
        unit: g.unit,
        iters: g.iters,
        ops: g.ops,
        ns: row.ns,
        cpuNs: row.cpuNs,
        medianNs: median(row.ns),
        minNs: Math.min(...row.ns),
        maxNs: Math.max(...row.ns),
        cpuMedianNs: median(row.cpuNs),
        ...(ratios
          ? { ratios, ratio: median(ratios), ratioMin: Math.min(...ratios), ratioMax: Math.max(...ratios), ratioOfMins: Math.min(...row.ns) / Math.min(...c.ns) }
          : {}),
      };
    }
  }
  // The figures the bench has always printed: the verbs row against C.
  Object.assign(out, {
    jsNs: samples.verbs.ns,
    cNs: samples.c.ns,
    jsCpuNs: samples.verbs.cpuNs,
    cCpuNs: samples.c.cpuNs,
    jsMedianNs: out.rows.verbs.medianNs,
    cMedianNs: out.rows.c.medianNs,
    ratio: out.rows.verbs.ratio,
  });
  if (process.env.BENCH_JSON === '1') console.log(JSON.stringify(out));
  else for (const line of formatNative(out)) console.log(line);
}

const LABELS = {
  verbs: 'verbs API, 1 WR/call',
  addon: 'addon calls only',
  c: 'C, same verbs',
  verbsStream: 'verbs API, lists',
  preparedStream: 'verbs API, prepared',
  cStream: 'C, same verbs',
};

/** The table for a result of this bench (also bench/index.js's and bench/native-vm.js's). */
export function formatNative(j) {
  const us = (ns) => (ns / 1000).toFixed(2);
  const lines = [`native data path on ${j.device}: ${j.size} B SENDs, ${j.rounds} rounds (medians; spread min-max; best: ratio of the fastest rounds)`];
  let group = '';
  for (const [k, r] of Object.entries(j.rows)) {
    if (r.group !== group) {
      group = r.group;
      const what = r.group === 'ping-pong' ? `ping-pong, ${r.iters} round trips a round` : `stream, lists of ${r.ops} WRs and polls of up to ${r.ops}, ${r.iters * r.ops} messages a round`;
      lines.push(`  ${what}`);
      lines.push(`    ${'loop'.padEnd(22)} ${`us/${r.unit}`.padStart(15)}  ${'spread'.padStart(15)}  ${'CPU us'.padStart(8)}  ratio to C (spread; best)`);
    }
    const ratio = r.ratio === undefined ? '' : `${r.ratio.toFixed(2)}x (${r.ratioMin.toFixed(2)}-${r.ratioMax.toFixed(2)}; ${r.ratioOfMins.toFixed(2)}x)`;
    const verdict = r.ratio === undefined || k === 'addon' ? '' : `  target <= ${j.target.toFixed(2)}x ${r.ratio <= j.target ? 'OK' : 'ABOVE'}`;
    lines.push(`    ${(LABELS[k] ?? k).padEnd(22)} ${us(r.medianNs).padStart(15)}  ${`${us(r.minNs)}-${us(r.maxNs)}`.padStart(15)}  ${us(r.cpuMedianNs).padStart(8)}  ${ratio}${verdict}`);
  }
  return lines;
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
