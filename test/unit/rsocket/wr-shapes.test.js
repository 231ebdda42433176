// Every send work request an rsocket posts — the inline message pair of a small send, the staged
// WRITE and its message, riowrite's WRITE — and every list it posts them in share one hidden
// class, as do the configurations of a connecting and an accepted socket, so that ibv_post_send
// and the data path, once optimised for one kind, do not throw their code away when the first of
// another kind arrives (a benchmark's 16-byte sync between bulk riowrites did, and so did a new
// connection). Checked with V8's own introspection in a child process (natives syntax is a
// command-line flag), along with the bytes that arrive, on each soft device: iWARP, where the
// messages are 4-byte SENDs behind plain RDMA WRITEs (RS_OPT_MSG_SEND), and RoCE, where they are
// the immediate data of RDMA WRITE WITH IMMEDIATE.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { WrOpcode } from '../../../dist/verbs/index.js';

const PAIR = new URL('../../lib/rs-pair.js', import.meta.url).href;
const RS = new URL('../../../dist/rsocket/index.js', import.meta.url).href;
const TX = new URL('../../../dist/rsocket/tx.js', import.meta.url).href;

const DEVICES = [
  // Three sends, each an RDMA WRITE and a SEND; riowrite's RDMA WRITE.
  { name: 'the soft iWARP device', env: {}, opcodes: [WrOpcode.RDMA_WRITE, WrOpcode.SEND], minWrs: 7 },
  // A private RoCE UDP port: other tests on this host never see these datagrams.
  // Three sends, each one RDMA WRITE WITH IMMEDIATE; riowrite's plain RDMA WRITE (as rsocket.c).
  { name: 'the soft RoCE device', env: { RDMACM_DEVICE: 'rxe_lo', RDMACM_ROCE_PORT: String(40000 + Math.floor(Math.random() * 20000)) }, opcodes: [WrOpcode.RDMA_WRITE, WrOpcode.RDMA_WRITE_WITH_IMM], minWrs: 4 },
];

for (const dev of DEVICES) test(`the rsocket posts every kind of send work request with one shape, in lists of one shape (V8), on ${dev.name}`, { timeout: 40_000 }, () => {
  const src = `
    const { withRsPair, sendAll, recvAll, fixed } = await import(${JSON.stringify(PAIR)});
    const { sendWrShape } = await import(${JSON.stringify(TX)});
    const { RS_EAGAIN, SOL_RDMA, SOL_SOCKET, RDMA_IOMAPSIZE, RDMA_INLINE, SO_RCVBUF, SO_SNDBUF, PROT_WRITE } = await import(${JSON.stringify(RS)});
    const out = [];
    // Collections before the first connection (as a loaded process has them) must not make its
    // requests start from another hidden class.
    for (let i = 0; i < 3; i++) gc();
    // The client sets its sizes as rstream does; the listener leaves them at the defaults.
    const sizes = [[SOL_SOCKET, SO_SNDBUF, 262144], [SOL_SOCKET, SO_RCVBUF, 262144], [SOL_RDMA, RDMA_INLINE, 64]];
    await withRsPair({ listener: [[SOL_RDMA, RDMA_IOMAPSIZE, 1]], client: [[SOL_RDMA, RDMA_IOMAPSIZE, 1], ...sizes] }, async ({ c, s }) => {
      const target = Buffer.alloc(4096);
      s.riomap(target, PROT_WRITE, 0);
      // The mapping goes to the peer with the server's next send.
      await sendAll(s, Buffer.from('sync'), fixed(4));
      await recvAll(c, 4, fixed(4));
      const wrs = [], lists = [];
      const qp = c.qp;
      const post = qp.postSend;
      qp.postSend = function (list) { lists.push(list); for (const w of list) wrs.push(w); return post.call(this, list); };
      const msgs = [16, 2000, 40_000].map((n, k) => Buffer.alloc(n, k + 1));
      for (const m of msgs) {
        await sendAll(c, m, fixed(m.length));
        const got = await recvAll(s, m.length, fixed(m.length));
        out.push(got.equals(m));
      }
      const w = Buffer.alloc(4096, 9);
      let n;
      while ((n = c.riowrite(w, 0, w.length, 0)) === RS_EAGAIN) await c.poll(0, 10);
      out.push(n);
      const t0 = Date.now();
      while (!target.equals(w) && Date.now() - t0 < 5000) { s.progress(); await new Promise((r) => setTimeout(r, 5)); }
      out.push(target.equals(w));
      out.push([...new Set(wrs.map((x) => x.opcode))].sort((a, b) => a - b), wrs.length >= ${dev.minWrs}, lists.length >= 4);
      // The same hidden class as the module's first request, made with large values before any
      // connection, however many garbage collections came between.
      const shape = sendWrShape();
      out.push(wrs.every((x) => %HaveSameMap(x, shape)), wrs.every((x) => %HaveSameMap(x.rdma, shape.rdma)));
      out.push(lists.every((x) => %HaveSameMap(x, lists[0])));
      // The client's configuration was made from nothing, the accepted socket's from its listener's.
      out.push(%HaveSameMap(c.cfg, s.cfg));
      qp.postSend = post;
    });
    console.log(JSON.stringify(out));`;
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '--expose-gc', '--input-type=module', '-e', src], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, ...dev.env } });
  assert.equal(r.status, 0, r.stderr);
  const opcodes = [...dev.opcodes].sort((a, b) => a - b);
  assert.deepEqual(JSON.parse(r.stdout.trim().split('\n').pop()), [true, true, true, 4096, true, opcodes, true, true, true, true, true, true]);
});
