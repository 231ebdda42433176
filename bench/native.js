// The native backend's data path against C: a 64 B SEND/RECV ping-pong between two RC QPs of
// this process on a kernel RDMA device (siw0, rxe0, mlx5_0 ...), connected through our rdma_cm
// API (librdmacm underneath), run
//   - in JavaScript: qp.postRecv / qp.postSend / cq.pollInto through the addon, and
//   - in C: the same libibverbs calls in the same order on the same QPs (the addon's
//     cLoopPingPong), busy-polling both,
// in alternating rounds after a warm-up; prints the median time per round trip of each and the
// median of the rounds' JS/C ratios (the target: JS within 2x of C). Without a native device it
// says so and exits 0.
//
// Env: BENCH_NATIVE_ITERS (round trips per round, default 20000), BENCH_NATIVE_ROUNDS (5),
// BENCH_NATIVE_WARMUP (untimed JS round trips first, 10000),
// BENCH_NATIVE_SIZE (64), BENCH_NATIVE_DEVICE (a device name; default: the first native one),
// BENCH_JSON=1 (one JSON line instead of the table).
import { Access, native, PortSpace, SendFlags, WrOpcode, createId, getDeviceList } from '../dist/index.js';
import { loadBinding } from '../dist/native/binding.js';

const ITERS = Number(process.env.BENCH_NATIVE_ITERS || 20000);
const ROUNDS = Number(process.env.BENCH_NATIVE_ROUNDS || 5);
/** Untimed JS round trips first: V8 compiles the data path (BENCH_NATIVE_WARMUP). */
const WARMUP = Number(process.env.BENCH_NATIVE_WARMUP || 10000);
const SIZE = Number(process.env.BENCH_NATIVE_SIZE || 64);
const PORT = 7790 + (process.pid % 100);

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
  const cqA = ctx.createCq(16);
  const cqB = ctx.createCq(16);
  const cap = { maxSendWr: 4, maxRecvWr: 4, maxSendSge: 1, maxRecvSge: 1 };
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

/** The JS loop: the calls cLoopPingPong makes, through the addon. */
function jsLoop(p, iters) {
  const { qpA, qpB, cqA, cqB, mr } = p;
  const sa = [{ addr: mr.addr, length: SIZE, lkey: mr.lkey }];
  const sb = [{ addr: mr.addr + 4096, length: SIZE, lkey: mr.lkey }];
  const ra = { wrId: 1, sgList: sa };
  const rb = { wrId: 2, sgList: sb };
  const xa = { wrId: 3, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: sa };
  const xb = { wrId: 4, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: sb };
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

function cLoop(b, p, iters) {
  const { qpA, qpB, cqA, cqB, mr } = p;
  const ns = b.cLoopPingPong(qpA._h, cqA._h, qpB._h, cqB._h, Float64Array.of(mr.addr, mr.addr + 4096, mr.lkey, mr.lkey, SIZE, iters));
  if (ns < 0) throw new Error(`cLoopPingPong: errno ${-ns}`);
  return ns;
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
  const p = await connectPair(dev);
  try {
    // Warm-up: V8 compiles the JS path; both loops touch the same QPs and memory.
    jsLoop(p, WARMUP);
    cLoop(b, p, Math.min(WARMUP, 2000));
    const js = [];
    const c = [];
    for (let r = 0; r < ROUNDS; r++) {
      js.push(jsLoop(p, ITERS) / ITERS);
      c.push(cLoop(b, p, ITERS) / ITERS);
    }
    const mj = median(js);
    const mc = median(c);
    // Each round's JS and C runs are back to back, under the same conditions: the ratio is the
    // median of the rounds' ratios (robust to a round slowed down by something else).
    const ratio = median(js.map((x, i) => x / (c[i] ?? x)));
    if (process.env.BENCH_JSON === '1') {
      console.log(JSON.stringify({ device: dev.name, size: SIZE, iters: ITERS, rounds: ROUNDS, jsNs: js, cNs: c, jsMedianNs: mj, cMedianNs: mc, ratio }));
    } else {
      console.log(`native data path on ${dev.name}: ${SIZE} B SEND/RECV ping-pong, ${ITERS} round trips x ${ROUNDS} rounds (median)`);
      console.log(`  JS through the addon   ${(mj / 1000).toFixed(2).padStart(9)} us/round trip   (${js.map((x) => (x / 1000).toFixed(2)).join(', ')})`);
      console.log(`  C loop, same verbs     ${(mc / 1000).toFixed(2).padStart(9)} us/round trip   (${c.map((x) => (x / 1000).toFixed(2)).join(', ')})`);
      console.log(`  ratio JS/C (median of rounds) ${ratio.toFixed(2).padStart(5)}x  (target <= 2.00x) ${ratio <= 2 ? 'OK' : 'ABOVE TARGET'}`);
    }
  } finally {
    await p.close();
  }
}

await main();
