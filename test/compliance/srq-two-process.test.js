// Shared receive queues across processes, on every device that has them (max_srq > 0): a client
// process opens several connections to this process, whose QPs all take their receives from one
// SRQ; every message lands once, in a receive completed on the QP of its connection; the limit
// event fires once; when the connections end the server QPs are flushed (Last WQE Reached on IB
// devices) and the SRQ's untaken receives stay posted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createId, PortSpace, Access, WcStatus, QpState, TransportType, AsyncEventType, SrqAttrMask } from '../../dist/index.js';
import { reap } from '../lib/cm-rc-pair.js';
import { forEachDevice, Cap } from '../lib/devices.js';
import { REPO_ROOT } from '../lib/tools.js';
import { until } from '../lib/wait.js';

const DIST_INDEX = join(REPO_ROOT, 'dist', 'index.js');

/** The client: `n` connections to 127.0.0.1:`port`, `per` messages on each; prints "sent", then waits for stdin to close. */
const CLIENT = `
const { createId, PortSpace, Access, WrOpcode, settleConnections } = await import(${JSON.stringify(DIST_INDEX)});
const [port, n, per] = process.argv.slice(-3).map(Number);
const ids = [];
for (let i = 0; i < n; i++) {
  const id = createId(null, null, PortSpace.TCP);
  await id.resolveAddr(null, { address: '127.0.0.1', port });
  await id.resolveRoute();
  id.createQp(null, { cap: { maxSendWr: per, maxRecvWr: 1 } });
  await id.connect({ responderResources: 1, initiatorDepth: 1 });
  ids.push(id);
}
for (let i = 0; i < n; i++) {
  const id = ids[i];
  for (let k = 0; k < per; k++) {
    const mr = id.pd.regMr(Buffer.from('conn ' + i + ' msg ' + k), Access.LOCAL_WRITE);
    id.qp.postSend({ wrId: k, opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr, length: mr.length, lkey: mr.lkey }], sendFlags: 2 });
  }
}
for (const id of ids) {
  let got = 0;
  while (got < per) {
    for (const wc of id.sendCq.poll(per)) {
      if (wc.status !== 0) { console.error('send failed', wc.status); process.exit(2); }
      got++;
    }
    await new Promise((r) => setImmediate(r));
  }
}
console.log('sent');
process.stdin.resume();
await new Promise((r) => process.stdin.on('end', r));
for (const id of ids) { await id.disconnect().catch(() => {}); id.destroyQp(); await id.destroy(); }
await settleConnections(2000);
process.exit(0);
`;

forEachDevice([Cap.RC, Cap.CM_TCP], (d) => {
  const skip = d.device.open().queryDevice().maxSrq > 0 ? false : 'max_srq 0';

  test('a client process\'s connections on one SRQ here: once each, on their QP; limit event; flush on exit', { skip }, async () => {
    const n = 3;
    const per = 4;
    const spare = 3;
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const recvCq = ctx.createCq(64);
    const sendCq = ctx.createCq(8);
    const srq = pd.createSrq({ attr: { maxWr: n * per + spare } });
    const buf = Buffer.alloc((n * per + spare) * 32);
    const mr = pd.regMr(buf, Access.LOCAL_WRITE);
    srq.postRecv(Array.from({ length: n * per + spare }, (_, i) => ({ wrId: i, sgList: [{ addr: mr.addr + i * 32, length: 32, lkey: mr.lkey }] })));
    srq.modify({ srqLimit: spare + 1 }, SrqAttrMask.LIMIT);
    const listen = createId(null, null, PortSpace.TCP);
    listen.bindAddr({ address: '127.0.0.1', port: 0 });
    await listen.listen(n);
    const child = spawn(process.execPath, ['--input-type=module', '-e', CLIENT, String(listen.srcPort), String(n), String(per)], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (b) => (out += b));
    child.stderr.on('data', (b) => (err += b));
    const exited = new Promise((r) => child.on('exit', (code) => r(code)));
    const servers = [];
    const events = [];
    try {
      for (let i = 0; i < n; i++) {
        const s = await listen.getRequest();
        s.createQp(pd, { srq, recvCq, sendCq, cap: { maxSendWr: 1 } });
        await s.accept({ responderResources: 1, initiatorDepth: 1 });
        servers.push(s);
      }
      const wcs = await reap(recvCq, n * per, 15_000);
      await until(() => out.includes('sent'), 10_000, `the client to finish (stderr ${err})`);
      const byQp = new Map(servers.map((s) => [s.qp.qpNum, []]));
      const seen = new Set();
      for (const wc of wcs) {
        assert.equal(wc.status, WcStatus.SUCCESS);
        assert.ok(!seen.has(wc.wrId), `wr ${wc.wrId} twice`);
        seen.add(wc.wrId);
        const i = Number(wc.wrId);
        byQp.get(wc.qpNum).push(buf.toString('latin1', i * 32, i * 32 + wc.byteLen));
      }
      // Each server QP got exactly one connection's messages, in order.
      const conns = new Set();
      for (const msgs of byQp.values()) {
        assert.equal(msgs.length, per);
        const c = /^conn (\d+) msg 0$/.exec(msgs[0])?.[1];
        assert.ok(c !== undefined, `first message ${msgs[0]}`);
        conns.add(c);
        assert.deepEqual(msgs, Array.from({ length: per }, (_, k) => `conn ${c} msg ${k}`));
      }
      assert.equal(conns.size, n);
      assert.equal(srq.depth, spare);
      // The limit (spare + 1) was crossed once: one event.
      for (let ev = ctx.tryGetAsyncEvent(); ev !== undefined; ev = ctx.tryGetAsyncEvent()) {
        ctx.ackAsyncEvent(ev);
        events.push(ev);
      }
      assert.equal(events.filter((e) => e.type === AsyncEventType.SRQ_LIMIT_REACHED && e.srq === srq).length, 1);

      // The client leaves; the server disconnects too (rdma_disconnect moves an IB QP to ERR, the
      // DREQ does not): the server QPs are in ERR and nothing of the SRQ is flushed.
      // Both ends disconnect at once (each sync-mode rdma_disconnect waits for the other's answer).
      child.stdin.end();
      await Promise.all(servers.map((s) => s.disconnect().catch(() => {})));
      assert.equal(await exited, 0, err);
      await until(() => servers.every((s) => s.qp.state === QpState.ERR), 10_000, 'the server QPs to go to ERR');
      assert.equal(recvCq.poll(16).length, 0, 'no receive was in progress: nothing to flush');
      assert.equal(srq.depth, spare);
      const last = [];
      for (let ev = ctx.tryGetAsyncEvent(); ev !== undefined; ev = ctx.tryGetAsyncEvent()) {
        ctx.ackAsyncEvent(ev);
        if (ev.type === AsyncEventType.QP_LAST_WQE_REACHED) last.push(ev.qp);
      }
      const want = d.transportType === TransportType.IWARP ? 0 : n;
      assert.equal(last.filter((q) => servers.some((s) => s.qp === q)).length, want);
    } finally {
      child.kill('SIGKILL');
      await exited;
      for (const s of servers) {
        s.destroyQp();
        await s.destroy();
      }
      await listen.destroy();
    }
    srq.destroy();
    mr.dereg();
  });
});
