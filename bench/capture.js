// The capture section of `npm run bench`: what a packet capture (docs/capture.md) costs. One row
// per soft device (rxe_lo for RoCE, siw_lo for iWARP): a ping-pong of 4 KiB SENDs between two
// connected QPs of one process, with no capture and with every device captured into a file, in
// interleaved runs (a process each). Figures: wall µs and CPU µs (user + system of the process,
// both ends) per round trip, and the capture's frames, drops and file size.
//
//   node bench/capture.js                 the section alone
//   node bench/capture.js --child DEV on|off ITERS     one run (prints one JSON line)
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fx, median } from './lib.js';

const SIZE = 4096;
const ITERS = Number(process.env.BENCH_CAPTURE_ITERS ?? 5000);
const ROWS = [
  { device: 'rxe_lo', what: 'RoCE (rxe_lo) 4 KiB SEND ping-pong' },
  { device: 'siw_lo', what: 'iWARP (siw_lo) 4 KiB SEND ping-pong' },
];

/** One run in this process: `iters` round trips (after as many untimed), capture `on` or not. */
async function child(device, on, iters) {
  process.env.RDMACM_DEVICE = device;
  const api = await import('../dist/index.js');
  const { loopbackPair } = await import('./loopback-pair.js');
  const { Access, WrOpcode, startCapture } = api;
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-bench-pcap-'));
  const file = join(dir, 'bench.pcapng');
  const cap = on ? startCapture('*', file) : null;
  const { listen, cli, srv } = await loopbackPair(api);
  const ends = [cli, srv].map((id) => {
    const buf = Buffer.alloc(SIZE, 1);
    const mr = id.pd.regMr(buf, Access.LOCAL_WRITE);
    const sge = [{ addr: mr.addr, length: SIZE, lkey: mr.lkey }];
    return { id, qp: id.qp, sge };
  });
  const post = (e) => e.qp.postRecv({ wrId: 1, sgList: e.sge });
  for (const e of ends) post(e);
  /** Wait for one receive completion on `e` (polling; both ends in this process). */
  const recv = async (e) => {
    for (;;) {
      const wcs = e.id.recvCq.poll(1);
      e.id.sendCq.poll(16);
      if (wcs.length) {
        if (wcs[0].status !== 0) throw new Error(`wc status ${wcs[0].status}`);
        return;
      }
      await new Promise((r) => setImmediate(r));
    }
  };
  const [a, b] = ends;
  const round = async () => {
    a.qp.postSend({ wrId: 2, opcode: WrOpcode.SEND, sgList: a.sge });
    await recv(b);
    post(b);
    b.qp.postSend({ wrId: 2, opcode: WrOpcode.SEND, sgList: b.sge });
    await recv(a);
    post(a);
  };
  for (let i = 0; i < iters; i++) await round();
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iters; i++) await round();
  const wall = Number(process.hrtime.bigint() - t0) / 1000 / iters;
  const c = process.cpuUsage(c0);
  const cpu = (c.user + c.system) / iters;
  for (const id of [cli, srv]) {
    id.destroyQp();
    await id.destroy();
  }
  await listen.destroy();
  let stats = null;
  if (cap) {
    await cap.stop();
    stats = { ...cap.stats, error: cap.stats.error?.message ?? null, fileBytes: statSync(file).size };
  }
  rmSync(dir, { recursive: true, force: true });
  console.log(JSON.stringify({ wall, cpu, stats }));
  process.exit(0);
}

/** The section: every row, capture off and on, `reps` interleaved runs each. */
export async function captureBench({ reps = 3, quick = false } = {}) {
  const iters = quick ? Math.ceil(ITERS / 5) : ITERS;
  const self = fileURLToPath(import.meta.url);
  console.log(`capture: cost of a packet capture (docs/capture.md), ${iters} round trips per run, median of ${reps}`);
  console.log('row'.padEnd(40), 'off µs/rt', 'on µs/rt', 'off CPU µs/rt', 'on CPU µs/rt', 'CPU on/off', 'frames', 'dropped');
  const out = [];
  for (const row of ROWS) {
    const runs = { off: [], on: [] };
    let stats = null;
    for (let r = 0; r < reps; r++) {
      for (const mode of ['off', 'on']) {
        const env = { ...process.env, RDMACM_BACKEND: 'soft' };
        delete env.RDMA_PCAP;
        const p = spawnSync(process.execPath, [self, '--child', row.device, mode, String(iters)], { env, encoding: 'utf8', timeout: 300_000 });
        const line = p.stdout.trim().split('\n').pop() ?? '';
        if (p.status !== 0 || !line.startsWith('{')) {
          console.log(`${row.what}: ${mode} run failed (exit ${p.status}) ${p.stderr.slice(0, 300)}`);
          continue;
        }
        const j = JSON.parse(line);
        runs[mode].push(j);
        if (mode === 'on') stats = j.stats;
      }
    }
    const m = (mode, k) => median(runs[mode].map((j) => j[k]));
    const res = { row: row.what, device: row.device, offUs: m('off', 'wall'), onUs: m('on', 'wall'), offCpuUs: m('off', 'cpu'), onCpuUs: m('on', 'cpu'), stats };
    res.cpuRatio = res.onCpuUs / res.offCpuUs;
    out.push(res);
    console.log(row.what.padEnd(40), fx(res.offUs).padStart(9), fx(res.onUs).padStart(8), fx(res.offCpuUs).padStart(13), fx(res.onCpuUs).padStart(12), fx(res.cpuRatio).padStart(10), String(stats?.packets ?? '-').padStart(6), String(stats?.dropped ?? '-').padStart(7));
  }
  return { iters, rows: out };
}

const argv = process.argv.slice(2);
if (argv[0] === '--child') await child(argv[1], argv[2] === 'on', Number(argv[3]));
else if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.env.RDMACM_BACKEND = 'soft';
  await captureBench({ reps: Number(process.env.BENCH_REPS ?? 3) });
}
