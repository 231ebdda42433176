// bench/roce.js end to end in its smoke mode: every row is printed (with its baseline and ratio)
// and the --json file is the documented shape. Figures are never checked: speed is measured by
// `npm run bench`, not asserted here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BENCH = join(ROOT, 'bench', 'roce.js');
const UDADDY = join(ROOT, 'dist', 'cli', 'udaddy.js');
const opts = { timeout: 130_000, skip: existsSync(UDADDY) ? false : `${UDADDY} is missing: run npm run build` };

function run(args, timeoutMs = 120_000) {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, [BENCH, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RDMACM_ROCE_PORT: '' } });
    let out = '';
    let err = '';
    c.stdout.on('data', (d) => (out += d));
    c.stderr.on('data', (d) => (err += d));
    const t = setTimeout(() => c.kill('SIGKILL'), timeoutMs);
    c.on('close', (code, signal) => {
      clearTimeout(t);
      resolve({ code, signal, out, err });
    });
  });
}

const NUM = '\\d+(\\.\\d+)?';
const SIDE = `\\(\\d+% delivered, rx CPU ${NUM} us/msg\\)`;
const ROWS = [
  new RegExp(`^64 B ping-pong RTT +UD SEND/RECV ${NUM} us +Node dgram ${NUM} us +UD/dgram ${NUM} \\(target <= 1\\.2\\)$`, 'm'),
  new RegExp(`^4096 B messages/s +UD SEND ${NUM}k/s ${SIDE} +Node dgram ${NUM}k/s ${SIDE} +UD/dgram ${NUM} \\(target >= 1\\.5\\)$`, 'm'),
  new RegExp(`^multicast, 1 receiver +UD SEND ${NUM}k/s ${SIDE} +Node dgram ${NUM}k/s ${SIDE} +UD/dgram ${NUM} \\(target >= 1\\.0\\)$`, 'm'),
  new RegExp(`^multicast, 2 receivers +UD SEND ${NUM}k/s ${SIDE} +Node dgram ${NUM}k/s ${SIDE} +UD/dgram ${NUM} \\(target >= 1\\.0\\)$`, 'm'),
  new RegExp(`^udaddy -c 100 resolution +udaddy ${NUM} ms +Node dgram 100 request/replies ${NUM} ms +udaddy/dgram ${NUM} \\(target <= 3\\)$`, 'm'),
  new RegExp(`^RC 64 B ping-pong RTT +RC SEND/RECV ${NUM} us +Node dgram ${NUM} us +RC/dgram ${NUM} \\(target <= 1\\.2\\)$`, 'm'),
  new RegExp(`^1 MiB RDMA WRITE bandwidth +RoCE ${NUM} MB/s +iWARP ${NUM} MB/s +RoCE/iWARP ${NUM} \\(target >= 1\\.0\\) +Node dgram 4096 B blast ${NUM} MB/s \\(\\d+% delivered\\) +RoCE/dgram ${NUM}$`, 'm'),
  new RegExp(`^cmtime -c 20 connect rate +RoCE ${NUM} conn/s +iWARP ${NUM} conn/s +RoCE/iWARP ${NUM} +rounds RoCE ${NUM} iWARP ${NUM}$`, 'm'),
];
/** The line under a ratio row: each side's rounds and CPU per operation, and the CPU ratio. */
const SPREAD = (unit) => new RegExp(`^ +(?:vs \\w+ \\([^)]+\\) )?rounds ours ${NUM}( \\[[^\\]]+\\])? base ${NUM}( \\[[^\\]]+\\])?; CPU ${unit.replace('/', '\\/')} ours ${NUM}( \\[[^\\]]+\\])? base ${NUM}( \\[[^\\]]+\\])? \\(${NUM}\\)$`, 'gm');
/** The kernel's UDP limit under the UD rate rows: measured, or skipped with its reason. */
const KERNEL = /^ +kernel UDP limit: (C sendmmsg\/recvmmsg 4096 B [\d.]+k?\/s received|skipped)/gm;

const positive = (x, what) => assert.ok(typeof x === 'number' && Number.isFinite(x) && x > 0, `${what}: ${x}`);

test('node bench/roce.js --quick prints every row with its baseline and ratio, and writes the JSON', opts, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-roce-'));
  try {
    const file = join(dir, 'r.json');
    const r = await run(['--quick', '--json', file]);
    const all = `exit ${r.code} ${r.signal ?? ''}\n${r.out}\n${r.err}`;
    assert.equal(r.code, 0, all);
    assert.match(r.out, /^roce: soft RoCEv2 rxe_lo \(UD, RC\) beside Node dgram, loopback; 1 round\(s\), median;/m, all);
    for (const row of ROWS) assert.match(r.out, row, all);
    // Under every ratio row its spread and CPU: pingpong, the three rate rows, udaddy, RC RTT and
    // the WRITE's two comparisons.
    const spreads = [...r.out.matchAll(SPREAD('us/RT'))].length + [...r.out.matchAll(SPREAD('us/msg'))].length + [...r.out.matchAll(SPREAD('ms/run'))].length + [...r.out.matchAll(SPREAD('us/MiB'))].length;
    assert.equal(spreads, 8, all);
    assert.equal([...r.out.matchAll(KERNEL)].length, 3, all);
    assert.match(r.out, new RegExp(`results written to ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`), all);

    const j = JSON.parse(readFileSync(file, 'utf8'));
    assert.equal(j.quick, true);
    assert.equal(j.reps, 1);
    assert.equal(typeof j.machine.node, 'string');
    const s = j.sections.roce;
    assert.ok(Number.isInteger(s.rocePort) && s.rocePort > 0 && s.rocePort < 65536, `rocePort ${s.rocePort}`);
    assert.deepEqual(Object.keys(s).filter((k) => typeof s[k] === 'object' && s[k] !== null && 'unit' in s[k]).sort(), ['cmtime', 'mcast1', 'mcast2', 'mtuRate', 'rcRtt', 'rcWrite', 'rtt', 'udaddy']);
    const units = { rtt: 'usec', mtuRate: 'msg/s', mcast1: 'msg/s', mcast2: 'msg/s', udaddy: 'ms', rcRtt: 'usec', rcWrite: 'B/s' };
    for (const [k, unit] of Object.entries(units)) {
      const row = s[k];
      assert.equal(row.unit, unit, k);
      positive(row.soft, `${k}.soft`);
      positive(row.node, `${k}.node`);
      assert.ok(Math.abs(row.vsNode - row.soft / row.node) < 1e-9, `${k}.vsNode is soft/node`);
      assert.equal(row.runs.soft.length, 1, `${k}: one round`);
      assert.equal(row.runs.node.length, 1, `${k}: one round`);
    }
    // The RC rows: a WRITE figure for each device, cmtime's rate over both.
    assert.equal(s.rcWrite.size, 1 << 20);
    assert.equal(s.rcWrite.datagram, 4096);
    positive(s.rcWrite.iwarp, 'rcWrite.iwarp');
    assert.ok(Math.abs(s.rcWrite.vsIwarp - s.rcWrite.soft / s.rcWrite.iwarp) < 1e-9, 'rcWrite.vsIwarp is soft/iwarp');
    positive(s.rcRtt.cpuUsPerRt.soft, 'rcRtt.cpuUsPerRt.soft');
    assert.equal(s.cmtime.unit, 'conn/s');
    assert.equal(s.cmtime.connections, 20);
    positive(s.cmtime.soft, 'cmtime.soft');
    positive(s.cmtime.iwarp, 'cmtime.iwarp');
    positive(s.rtt.cpuUsPerRt.soft, 'rtt.cpuUsPerRt.soft');
    positive(s.rtt.cpuUsPerRt.node, 'rtt.cpuUsPerRt.node');
    assert.equal(s.mcast1.receivers, 1);
    assert.equal(s.mcast2.receivers, 2);
    assert.equal(s.mtuRate.size, 4096);
    assert.equal(s.udaddy.connections, 100);
    for (const k of ['mtuRate', 'mcast1', 'mcast2']) for (const side of ['soft', 'node']) positive(s[k].rxCpuUsPerMsg[side], `${k}.rxCpuUsPerMsg.${side}`);
    // Each receiver of each blast reported its burst: two for the two-receiver row.
    assert.equal(s.mcast2.runs.receiversSoft[0].length, 2);
    assert.equal(s.mcast2.runs.receiversNode[0].length, 2);
    for (const k of ['mtuRate', 'mcast1', 'mcast2']) {
      for (const side of ['soft', 'node']) {
        const f = s[k].delivered[side];
        assert.ok(f > 0 && f <= 1, `${k}.delivered.${side} ${f}`);
      }
    }
    // Unicast UD between two processes of the host goes over the QPN owner's Unix socket: nothing
    // is lost, and the receiver's device counted every datagram it handled.
    assert.equal(s.mtuRate.delivered.soft, 1);
    const rep = s.mtuRate.runs.receiversSoft[0][0];
    assert.equal(rep.count, s.mtuRate.count);
    assert.equal(rep.noRecvWqe, 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('node bench/roce.js refuses an unknown option or row', opts, async () => {
  const a = await run(['--fast'], 10_000);
  assert.notEqual(a.code, 0);
  assert.match(a.err, /unknown option --fast/);
  const b = await run(['--only', 'pingpong,nope'], 10_000);
  assert.notEqual(b.code, 0);
  assert.match(b.err, /unknown row nope/);
});
