// A RoCE datagram the kernel hands to the wrong process, captured: the process that read it from
// UDP writes it as forwarded on to the QPN's owner, the owner writes it as forwarded to it, and a
// datagram read by its owner carries no mark. Three processes: two ud-peer.js receivers (the one
// bound last gets every datagram from the kernel) and a raw UDP sender here, each peer with its
// own RDMA_PCAP file. Decoded with tshark; skips loudly without it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PORT, rawSender } from '../lib/roce.js';

const PEER = fileURLToPath(new URL('../unit/transport/roce/ud-peer.js', import.meta.url));
const NO_TSHARK = spawnSync('tshark', ['--version']).status === 0 ? false : 'tshark is not installed (apt-get install tshark): capture files are not decoded';
if (NO_TSHARK) process.stderr.write(`\n${'#'.repeat(78)}\n# SKIPPED: ${NO_TSHARK}\n${'#'.repeat(78)}\n\n`);

const children = new Set();
after(() => {
  for (const c of children) c.kill('SIGKILL');
});

/** Start ud-peer.js capturing into `file`; `next()` resolves with its next JSON line. */
function peer(file, ...args) {
  const c = spawn(process.execPath, [PEER, ...args.map(String)], { env: { ...process.env, RDMACM_ROCE_PORT: String(PORT), RDMA_PCAP: file }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(c);
  c.on('exit', () => children.delete(c));
  const lines = [];
  const waiters = [];
  createInterface({ input: c.stdout }).on('line', (l) => {
    const v = JSON.parse(l);
    const w = waiters.shift();
    if (w) w(v);
    else lines.push(v);
  });
  return {
    next: () => (lines.length ? Promise.resolve(lines.shift()) : new Promise((r) => waiters.push(r))),
    exited: new Promise((r) => c.on('exit', (code) => r(code))),
  };
}

/** Per frame of `file`: direction flags, comment, destination QP, payload text. */
function frames(file) {
  const r = spawnSync('tshark', ['-r', file, '-d', `udp.port==${PORT},infiniband`, '-T', 'fields', '-e', 'frame.packet_flags_direction', '-e', 'frame.comment', '-e', 'infiniband.bth.destqp', '-e', 'data.data'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      const [dir, comment, qp, data] = l.split('\t');
      return { dir, comment, qp: Number(qp), text: Buffer.from((data ?? '').replace(/:/g, ''), 'hex').toString() };
    });
}

test('a datagram read by the wrong process is captured there as forwarded on, and by its owner as forwarded to it', { skip: NO_TSHARK, timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-pcap-fwd-'));
  const raw = await rawSender();
  try {
    const owner = peer(join(dir, 'owner.pcapng'), 'recv', 0x99, 3);
    const { qpn } = await owner.next();
    const other = peer(join(dir, 'other.pcapng'), 'recv', 0x97, 1);
    const { qpn: otherQpn } = await other.next();
    await new Promise((res) => setTimeout(res, 50));
    for (const text of ['via kernel 0', 'via kernel 1', 'via kernel 2']) await raw.send(raw.ud({ destQp: qpn, qkey: 0x99, payload: Buffer.from(text) }));
    assert.deepEqual((await owner.next()).got, ['via kernel 0', 'via kernel 1', 'via kernel 2']);
    await raw.send(raw.ud({ destQp: otherQpn, qkey: 0x97, payload: Buffer.from('done') }));
    assert.deepEqual((await other.next()).got, ['done']);
    assert.equal(await owner.exited, 0);
    assert.equal(await other.exited, 0);
    assert.deepEqual(readdirSync(dir).sort(), ['other.pcapng', 'owner.pcapng']);

    const inOwner = frames(join(dir, 'owner.pcapng')).filter((f) => f.qp === qpn);
    assert.equal(inOwner.length, 3, JSON.stringify(inOwner));
    for (const f of inOwner) {
      assert.equal(f.dir, '0x00000001', 'inbound');
      assert.match(f.comment, /^forwarded: handed over by another process/);
      assert.match(f.text, /via kernel \d$/);
    }
    const inOther = frames(join(dir, 'other.pcapng'));
    const passedOn = inOther.filter((f) => f.qp === qpn);
    assert.equal(passedOn.length, 3, JSON.stringify(inOther));
    for (const f of passedOn) {
      assert.equal(f.dir, '0x00000001');
      assert.match(f.comment, /^forwarded: read from UDP by this process and handed to the process holding/);
    }
    const own = inOther.filter((f) => f.qp === otherQpn);
    assert.equal(own.length, 1);
    assert.equal(own[0].comment, '', 'a datagram read by its owner carries no mark');
    assert.equal(own[0].text, 'done');
  } finally {
    raw.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
