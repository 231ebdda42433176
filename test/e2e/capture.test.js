// Packet capture of the soft devices (docs/capture.md), decoded by Wireshark's tshark: tool runs
// over rxe_lo (rping, ibv_rc_pingpong) and siw_lo (rping, rstream) with RDMA_PCAP set, one file
// per process; each file must decode with no malformed packet and no expert error, show the
// protocol layers and opcodes of the exchange, and mark the datagrams another process forwarded.
// The capture API: counters, drops with a small buffer, and a file that cannot be written,
// reported once while the device keeps working. Skips loudly without tshark.
import test from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCli, runCli, describeRun, waitRoceListening } from '../lib/tools.js';
import { cli, ROCE_PORT, NO_TSHARK, tshark, fields, decodesCleanly, captured } from '../lib/capture.js';
import { freePort } from '../lib/ports.js';
import { sleep } from '../lib/wait.js';
import { loopbackGidIndex } from '../lib/pingpong.js';
import { getDeviceList, startCapture } from '../../dist/index.js';
import { rcPair } from '../lib/cm-rc-pair.js';
import { withRsPair, sendAll, recvAll, fixed } from '../lib/rs-pair.js';

const devices = new Set(getDeviceList().map((d) => d.name));

const roceOpts = { skip: NO_TSHARK || (devices.has('rxe_lo') ? false : 'no rxe_lo device'), timeout: 120_000 };
const siwOpts = { skip: NO_TSHARK || (devices.has('siw_lo') ? false : 'no siw_lo device'), timeout: 120_000 };

test('rping over rxe_lo, captured: RoCEv2 frames decode (BTH, RETH, AETH, ICRC), CM MADs, forwarded datagrams marked', roceOpts, async () => {
  const port = await freePort();
  const args = ['-a', '127.0.0.1', '-p', String(port), '-C', '5', '-S', '3000'];
  const { files, dir } = await captured('rping', ['-s', ...args], ['-c', ...args], { roce: true, port, env: { RDMACM_DEVICE: 'rxe_lo' } });
  try {
    for (const f of files) {
      const v = decodesCleanly(f);
      assert.match(v, /InfiniBand/);
      assert.match(v, /Base Transport Header/);
      assert.match(v, /RDMA Extended Transport Header/, 'RETH of the RDMA read and write');
      assert.match(v, /ACK Extended Transport Header/, 'AETH of acknowledgements and read responses');
      assert.match(v, /Invariant CRC/);
      const rows = fields(f, ['frame.protocols', 'infiniband.bth.opcode', 'frame.comment', 'frame.packet_flags_direction']);
      assert.ok(rows.length >= 20, `${rows.length} frames`);
      for (const r of rows) assert.match(r[0], /^eth:ethertype:ip:udp:infiniband/, `every frame is RoCEv2: ${r[0]}`);
      const ops = new Set(rows.map((r) => Number(r[1])));
      // RC SEND_ONLY 0x04, RDMA_WRITE_ONLY 0x0a, RDMA_READ_REQUEST 0x0c, RDMA_READ_RESPONSE_ONLY 0x10, ACK 0x11, UD SEND_ONLY (MADs) 0x64.
      for (const op of [0x04, 0x0a, 0x0c, 0x10, 0x11, 0x64]) assert.ok(ops.has(op), `opcode 0x${op.toString(16)} in ${[...ops]}`);
      // Between two processes of one host, each datagram is handed over: one side sends it
      // (local) and the other receives it forwarded.
      const inbound = rows.filter((r) => r[3] === '0x00000001');
      const outbound = rows.filter((r) => r[3] === '0x00000002');
      assert.ok(inbound.length > 0 && outbound.length > 0, 'both directions');
      assert.ok(inbound.every((r) => /^forwarded: /.test(r[2])), 'received datagrams say they were forwarded');
      assert.ok(outbound.every((r) => /^local: /.test(r[2])), 'sent datagrams say they were handed over locally');
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('ibv_rc_pingpong over rxe_lo, captured: RC SEND and ACK frames decode', roceOpts, async () => {
  const port = await freePort();
  const dev = getDeviceList().find((d) => d.name === 'rxe_lo');
  const base = ['-d', 'rxe_lo', '-g', String(loopbackGidIndex(dev)), '-n', '10', '-p', String(port)];
  const { files, dir } = await captured('ibv_rc_pingpong', base, [...base, '127.0.0.1'], { env: { RDMACM_PP_TIMEOUT_MS: '3000' } });
  try {
    for (const f of files) {
      decodesCleanly(f);
      const ops = fields(f, ['infiniband.bth.opcode']).map((r) => Number(r[0]));
      // 4096-byte messages over a 1024-byte path MTU: SEND_FIRST 0x00, MIDDLE 0x01, LAST 0x02.
      assert.ok(ops.filter((o) => o === 0x02).length >= 10, `SEND_LAST frames: ${ops}`);
      assert.ok(ops.includes(0x00) && ops.includes(0x01), 'SEND_FIRST, SEND_MIDDLE');
      assert.ok(ops.includes(0x11), 'ACKs');
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** The iWARP checks of a file: handshake, MPA start frames, DDP/RDMAP, FIN. */
function iwarpChecks(f) {
  decodesCleanly(f);
  const rows = fields(f, ['frame.protocols', 'tcp.flags', 'iwarp_rdma.opcode', 'iwarp_mpa.key.req', 'iwarp_mpa.key.rep']);
  assert.equal(rows[0][1], '0x0002', 'SYN first');
  assert.equal(rows[1][1], '0x0012', 'then SYN-ACK');
  assert.equal(rows[2][1], '0x0010', 'then ACK');
  const protos = rows.map((r) => r[0]);
  assert.ok(protos.some((p) => p === 'eth:ethertype:ip:tcp:iwarp_mpa'), 'MPA start frames');
  assert.ok(protos.filter((p) => p.includes('iwarp_ddp_rdmap')).length >= 5, 'DDP/RDMAP frames');
  assert.ok(rows.some((r) => r[1] === '0x0011'), 'FIN');
  return new Set(rows.map((r) => r[2]).filter((x) => x !== '').map(Number));
}

test('rping over siw_lo, captured: TCP handshake, MPA request/reply, DDP/RDMAP Send, Write, Read Request/Response', siwOpts, async () => {
  const port = await freePort();
  const args = ['-a', '127.0.0.1', '-p', String(port), '-C', '5', '-S', '3000'];
  const { files, dir } = await captured('rping', ['-s', ...args], ['-c', ...args], { env: { RDMACM_DEVICE: 'siw_lo' } });
  try {
    for (const f of files) {
      const ops = iwarpChecks(f);
      // RDMAP opcodes: Write 0, Read Request 1, Read Response 2, Send 3.
      for (const op of [0, 1, 2, 3]) assert.ok(ops.has(op), `RDMAP opcode ${op} in ${[...ops]}`);
      const mpa = fields(f, ['iwarp_mpa.key.req', 'iwarp_mpa.key.rep']);
      assert.equal(mpa.filter((r) => r[0] !== '').length, 1, 'one MPA request');
      assert.equal(mpa.filter((r) => r[1] !== '').length, 1, 'one MPA reply');
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('rstream over siw_lo, captured: the rsockets stream decodes as MPA/DDP/RDMAP', siwOpts, async () => {
  const port = await freePort();
  const { files, dir } = await captured('rstream', ['-p', String(port), '-S', '4096', '-C', '20', '-T', 'v'], ['-s', '127.0.0.1', '-p', String(port), '-S', '4096', '-C', '20', '-T', 'v'], { env: { RDMACM_DEVICE: 'siw_lo' } });
  try {
    for (const f of files) {
      const ops = iwarpChecks(f);
      assert.ok(ops.has(0) || ops.has(3), `writes or sends: ${[...ops]}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

for (const dev of ['rxe_lo', 'siw_lo']) {
  test(`rping over IPv6 (::1) on ${dev}, captured: Ethernet/IPv6 frames decode cleanly`, dev === 'rxe_lo' ? roceOpts : siwOpts, async () => {
    const port = await freePort();
    const args = ['-a', '::1', '-p', String(port), '-C', '3'];
    const { files, dir } = await captured('rping', ['-s', ...args], ['-c', ...args], { env: { RDMACM_DEVICE: dev } });
    try {
      for (const f of files) {
        decodesCleanly(f);
        const protos = fields(f, ['frame.protocols']).map((r) => r[0]);
        const want = dev === 'rxe_lo' ? /^eth:ethertype:ipv6:udp:infiniband/ : /^eth:ethertype:ipv6:tcp/;
        assert.ok(protos.length > 10 && protos.every((p) => want.test(p)), protos.join(' '));
        if (dev === 'siw_lo') assert.ok(protos.some((p) => p.includes('iwarp_ddp_rdmap')));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('startCapture: counters of an in-process exchange; a small buffer drops and counts; an unwritable file is reported once and the device keeps working', { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-pcap-'));
  try {
    const ok = startCapture('*', join(dir, 'all.pcapng'));
    const small = startCapture('*', join(dir, 'small.pcapng'), { bufferBytes: 64 });
    const bad = startCapture('*', join(dir, 'missing', 'x.pcapng'));
    const errors = [];
    bad.on('error', (e) => errors.push(e));
    const p = await rcPair();
    await p.close();
    await sleep(50);
    // A second exchange after the failure: the device works on.
    const q = await rcPair();
    await q.close();
    await Promise.all([ok.stop(), small.stop(), bad.stop()]);
    assert.ok(ok.stats.packets > 0, JSON.stringify(ok.stats));
    assert.equal(ok.stats.dropped, 0);
    assert.ok(ok.stats.written > ok.stats.bytes, 'frames and their blocks are written');
    assert.equal(ok.stats.error, null);
    assert.equal(small.stats.packets, 0, 'nothing fits 64 bytes beside the headers');
    assert.equal(small.stats.dropped, ok.stats.packets, 'each frame dropped is counted');
    assert.equal(errors.length, 1, 'reported once');
    assert.equal(errors[0].code, 'ENOENT');
    assert.equal(bad.stats.error, errors[0]);
    assert.ok(bad.stats.dropped > 0);
    if (!NO_TSHARK) decodesCleanly(join(dir, 'all.pcapng'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a capture started while an iWARP connection is open: its first frame says so, the rest is plain TCP with consistent sequence numbers', { skip: siwOpts.skip, timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-pcap-'));
  const prev = process.env.RDMACM_DEVICE;
  process.env.RDMACM_DEVICE = 'siw_lo';
  try {
    const file = join(dir, 'mid.pcapng');
    let cap;
    await withRsPair({}, async ({ c, s }) => {
      const msg = Buffer.alloc(3000, 7);
      await Promise.all([sendAll(c, msg, fixed(1000)), recvAll(s, msg.length, fixed(3000))]);
      cap = startCapture('siw_lo', file);
      const [, got] = await Promise.all([sendAll(c, msg, fixed(1000)), recvAll(s, msg.length, fixed(3000))]);
      assert.deepEqual(got, msg);
    });
    await cap.stop();
    assert.ok(cap.stats.packets > 0, JSON.stringify(cap.stats));
    decodesCleanly(file);
    const rows = fields(file, ['frame.comment', 'tcp.flags.syn', 'frame.protocols']);
    assert.match(rows[0][0], /^capture started mid-connection/);
    assert.ok(rows.every((r) => r[1] !== '1'), 'no SYN for a connection whose start was not seen');
    const analysis = tshark(file, ['-q', '-z', 'expert,warn']);
    assert.doesNotMatch(analysis, /previous segment not captured|ACKed segment that wasn't captured/i, analysis);
  } finally {
    if (prev === undefined) delete process.env.RDMACM_DEVICE;
    else process.env.RDMACM_DEVICE = prev;
    rmSync(dir, { recursive: true, force: true });
  }
});

test('RDMA_PCAP naming a file that cannot be created: one warning per process on stderr, the run succeeds', { skip: devices.has('rxe_lo') ? false : 'no rxe_lo device', timeout: 120_000 }, async () => {
  const port = await freePort();
  const args = ['-a', '127.0.0.1', '-p', String(port), '-C', '3', '-v'];
  const e = { RDMACM_ROCE_PORT: ROCE_PORT, RDMACM_DEVICE: 'rxe_lo', RDMA_PCAP: '/nonexistent-dir/rping-%p.pcapng' };
  const srv = startCli(cli('rping'), ['-s', ...args], { env: e, timeoutMs: 60_000 });
  try {
    await waitRoceListening(ROCE_PORT, port, srv.done);
    const c = await runCli(cli('rping'), ['-c', ...args], { env: e, timeoutMs: 60_000 });
    const s = await srv.done;
    const both = `${describeRun('client', c)}\n${describeRun('server', s)}`;
    assert.equal(c.code, 0, both);
    assert.equal(s.code, 0, both);
    for (const r of [c, s]) {
      const warnings = r.stderr.split('\n').filter((l) => l.startsWith('rdmacm: packet capture'));
      assert.equal(warnings.length, 1, both);
      assert.match(warnings[0], /^rdmacm: packet capture to \/nonexistent-dir\/rping-\d+\.pcapng stopped: ENOENT/);
      assert.equal(r.stdout.split('\n').filter((l) => l.includes('ping data: ')).length, 3, both);
    }
  } finally {
    srv.kill('SIGKILL');
  }
});
