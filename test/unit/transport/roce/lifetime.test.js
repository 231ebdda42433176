// How long a process using the soft RoCE device lives, and what it leaves behind when it ends:
// a listening id or a QP holds the event loop (as a listening TCP server), a posted send is the
// kernel's once ibv_post_send returns, settleConnections() waits for datagrams handed to other
// processes, and a burst of 4 KiB datagrams fits the sockets' receive buffers (drops counted).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { readFileSync } from 'node:fs';
import dgram from 'node:dgram';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { PORT } from '../../../lib/roce.js';
import { sleep } from '../../../lib/wait.js';

const PEER = fileURLToPath(new URL('./lifetime-peer.js', import.meta.url));
const UD_PEER = fileURLToPath(new URL('./ud-peer.js', import.meta.url));
const children = new Set();
after(() => {
  for (const c of children) c.kill('SIGKILL');
});

/** Start a peer script; `next()` resolves with its next JSON line, `exited` with its exit code. */
function run(script, args, env = {}) {
  const c = spawn(process.execPath, [script, ...args.map(String)], { env: { ...process.env, RDMACM_ROCE_PORT: String(PORT), ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(c);
  const exited = new Promise((r) => c.on('exit', (code) => (children.delete(c), r(code))));
  const lines = [];
  const waiters = [];
  createInterface({ input: c.stdout }).on('line', (l) => {
    const v = JSON.parse(l);
    const w = waiters.shift();
    if (w) w(v);
    else lines.push(v);
  });
  return { proc: c, exited, next: () => (lines.length ? Promise.resolve(lines.shift()) : new Promise((r) => waiters.push(r))) };
}

/** Whether `p` is still running after `ms`. */
async function aliveAfter(p, ms) {
  const r = await Promise.race([p.exited.then(() => false), sleep(ms).then(() => true)]);
  return r;
}

test('a listening UD id keeps its process alive; destroyed, the process ends by itself', async () => {
  const port = 30000 + (PORT % 20000);
  const l = run(PEER, ['listen', port]);
  assert.deepEqual(await l.next(), { listening: true });
  assert.equal(await aliveAfter(l, 1000), true, 'a listener with nothing else pending still runs');
  l.proc.kill('SIGKILL');
  const d = run(PEER, ['listen', port + 1, 200]);
  assert.deepEqual(await d.next(), { listening: true });
  assert.equal(await d.exited, 0, 'after rdma_destroy_id nothing holds the process');
});

test('a UD QP keeps its process alive; destroyed, the process ends by itself', async () => {
  const q = run(PEER, ['qp']);
  assert.ok((await q.next()).qpn > 1);
  assert.equal(await aliveAfter(q, 1000), true);
  q.proc.kill('SIGKILL');
  const d = run(PEER, ['qp', 200]);
  await d.next();
  assert.equal(await d.exited, 0);
});

test('ibv_post_send hands the datagram to the kernel before it returns: a process exiting at once loses none', async () => {
  // 127.0.0.2 is no GID of rxe_lo: the datagrams go through the UDP socket to a plain receiver.
  const rx = dgram.createSocket('udp4');
  let n = 0;
  let bad = 0;
  rx.on('message', (m) => {
    if (m.length === 12 + 8 + 64 + 4 && m[0] === 0x64) n++;
    else bad++;
  });
  rx.bind(PORT, '127.0.0.2');
  await once(rx, 'listening');
  try {
    const p = run(PEER, ['exit-now', '127.0.0.2', 40]);
    assert.equal(await p.exited, 0);
    await sleep(200);
    assert.equal(bad, 0);
    assert.equal(n, 40, 'every UD SEND ONLY left the process before it exited');
  } finally {
    rx.close();
  }
});

test('settleConnections() before process.exit(): datagrams for another process of the host all arrive', async () => {
  const r = run(UD_PEER, ['recv', 0x99, 20]);
  const { qpn } = await r.next();
  const s = run(PEER, ['settle-exit', qpn, 0x99, 20]);
  assert.equal(await s.exited, 0);
  const got = await r.next();
  assert.deepEqual(got.got, Array.from({ length: 20 }, (_, i) => `msg ${i}`));
  assert.equal(await r.exited, 0);
});

/** Send `count` 4 KiB datagrams (BTH for QPN 0: each is dropped and counted once) to 127.0.0.1 at once. */
async function burst(count) {
  const tx = dgram.createSocket('udp4');
  tx.bind(0, '127.0.0.1');
  await once(tx, 'listening');
  const pkt = Buffer.alloc(4096);
  let sent = 0;
  await new Promise((resolve) => {
    for (let i = 0; i < count; i++) tx.send(pkt, PORT, '127.0.0.1', () => ++sent === count && resolve());
  });
  tx.close();
}

const received = (c) => Object.entries(c).reduce((n, [k, v]) => n + (k === 'rcvd_pkts' || (k.startsWith('rcvd_') && k.endsWith('_drop')) ? v : 0), 0);

test('a burst of 200 datagrams of 4 KiB fits the receive buffer; with a small one the kernel drops are counted', async () => {
  const rmemMax = Number(readFileSync('/proc/sys/net/core/rmem_max', 'utf8'));
  // Default buffers (4 MiB asked, capped at net.core.rmem_max): all arrive where the kernel allows it.
  let p = run(PEER, ['sink', 600]);
  await p.next();
  await burst(200);
  let { counters } = await p.next();
  assert.equal(received(counters) + counters.udp_rcvbuf_drop, 200, JSON.stringify(counters));
  if (rmemMax >= 4 << 20) assert.equal(counters.udp_rcvbuf_drop, 0, JSON.stringify(counters));
  assert.equal(await p.exited, 0);
  // A 16 KiB buffer (RDMACM_ROCE_SOCKBUF) holds a few: the rest are the kernel's drops, counted.
  p = run(PEER, ['sink', 600], { RDMACM_ROCE_SOCKBUF: '16384' });
  await p.next();
  await burst(200);
  ({ counters } = await p.next());
  assert.ok(counters.udp_rcvbuf_drop > 0, JSON.stringify(counters));
  assert.equal(received(counters) + counters.udp_rcvbuf_drop, 200, JSON.stringify(counters));
  assert.equal(await p.exited, 0);
});
