// Shared-receive-queue traffic over RC connections (rdma_cm, RDMA_PS_TCP), for the interop suite:
//   node srq-peer.mjs <package dir> server <address> <port> <conns> <msgs> [limit]
//   node srq-peer.mjs <package dir> client <address> <port> <conns> <msgs>
// The server accepts <conns> connections whose QPs all take their receives from one SRQ (made by
// rdma_create_srq on the first connection's id, named in the other ids' rdma_create_qp), with
// <conns>*<msgs> receives posted beforehand and the limit armed at [limit] (default 4); each
// client connection i (i in its private data and in every message) sends <msgs> SENDs. The
// server checks that every receive completed exactly once, successfully, each connection's
// messages on that connection's QP, and reads the SRQ limit event; it tells each client it is
// done (a SEND the client waits for before it disconnects); then on its own device it
// probes what the SRQ does next (ibv_post_recv on a QP of the SRQ, a resize, the srq_limit
// query() reports after the event, destroy while QPs use it, QP_LAST_WQE_REACHED when a QP on
// it goes to ERR) and prints one JSON line. The client prints its send completions. Exit 0 when
// the traffic checks pass (the probes are reported, not judged), else 1.
// Runs on whatever backend the environment selects (RDMACM_BACKEND, RDMACM_DEVICE). Env:
// READY_FILE (the server creates it once it listens), PEER_DEADLINE_SEC (default 150).
import { writeFileSync } from 'node:fs';
import { pollUntil, sleep } from './guest-cq.mjs';

const [root, role, address, portStr, connsStr, msgsStr, limitStr] = process.argv.slice(2);
const lib = await import(`${root}/dist/index.js`);
const { createId, PortSpace, WrOpcode, SendFlags, Access, AsyncEventType, QpState, SrqAttrMask, WcStatus } = lib;

const port = Number(portStr);
const conns = Number(connsStr);
const msgs = Number(msgsStr);
const limit = Number(limitStr ?? 4);
const SLOT = 64;
const deadline = Date.now() + Number(process.env.PEER_DEADLINE_SEC || 150) * 1000;
const codeOf = (f) => {
  try {
    f();
    return 'ok';
  } catch (e) {
    return e.code ?? String(e);
  }
};
/** What `f` returns, or the code of what it throws. */
const valueOf = (f) => {
  try {
    return f();
  } catch (e) {
    return e.code ?? String(e);
  }
};

/** Poll `cq` until `n` completions arrived (or the deadline). */
const drain = (cq, n) => pollUntil(cq, n, deadline);

/** The next async event of `ctx` of one of `types`, or null after `ms`. */
async function asyncEvent(ctx, types, ms) {
  const signal = AbortSignal.timeout(ms);
  try {
    for (;;) {
      const ev = await ctx.getAsyncEvent(signal);
      ctx.ackAsyncEvent(ev);
      if (types.includes(ev.type)) return ev;
    }
  } catch {
    return null;
  }
}

const cap = { maxSendWr: msgs + 2, maxRecvWr: 1, maxSendSge: 1, maxRecvSge: 1 };
// A server QP's receive queue is the SRQ; its own size only sizes the receive CQ rdma_create_qp makes.
const srvCap = { ...cap, maxRecvWr: msgs + 1 };
const conn = { responderResources: 1, initiatorDepth: 1, rnrRetryCount: 7, retryCount: 7 };

async function server() {
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address, port });
  await listen.listen(conns);
  if (process.env.READY_FILE) writeFileSync(process.env.READY_FILE, '');
  const total = conns * msgs;
  const children = [];
  let srq = null;
  let ctx = null;
  let buf = null;
  let mr = null;
  let srqAttr = null;
  const events = [];
  for (let i = 0; i < conns; i++) {
    const child = await listen.getRequest();
    if (srq === null) {
      const init = { attr: { maxWr: total, maxSge: 1, srqLimit: 0 } };
      srq = child.createSrq(null, init);
      ctx = srq.context;
      srqAttr = { ...init.attr };
      buf = Buffer.alloc(total * SLOT);
      mr = srq.pd.regMr(buf, Access.LOCAL_WRITE);
      srq.postRecv(Array.from({ length: total }, (_, k) => ({ wrId: k, sgList: [{ addr: mr.addr + k * SLOT, length: SLOT, lkey: mr.lkey }] })));
      srq.modify({ srqLimit: limit }, SrqAttrMask.LIMIT);
      child.createQp(null, { cap: srvCap });
    } else {
      child.createQp(null, { cap: srvCap, srq });
    }
    children.push(child);
    await child.accept(conn);
  }
  const limitEvent = asyncEvent(ctx, [AsyncEventType.SRQ_LIMIT_REACHED], 60_000);
  // Every child's receive CQ: the completions of the WRs its QP took from the SRQ.
  const wcs = [];
  while (wcs.length < total && Date.now() < deadline) {
    let got = 0;
    for (const c of children) {
      const w = c.recvCq.poll(16);
      got += w.length;
      for (const x of w) wcs.push({ wc: x, child: c });
    }
    if (!got) await sleep(2);
  }
  const ev = await limitEvent;
  const seen = new Set();
  const byConn = new Map();
  const problems = [];
  for (const { wc, child } of wcs) {
    const id = Number(wc.wrId);
    if (wc.status !== WcStatus.SUCCESS) problems.push(`wr ${id}: status ${wc.status}`);
    if (seen.has(id)) problems.push(`wr ${id} completed twice`);
    seen.add(id);
    if (wc.qpNum !== child.qp.qpNum) problems.push(`wr ${id} on QP ${wc.qpNum}, polled from QP ${child.qp.qpNum}'s CQ`);
    const text = buf.subarray(id * SLOT, id * SLOT + wc.byteLen).toString();
    const m = /^c(\d+)m(\d+)$/.exec(text);
    if (!m) {
      problems.push(`wr ${id}: ${JSON.stringify(text)}`);
      continue;
    }
    const key = `${m[1]}/${m[2]}`;
    if (byConn.has(key)) problems.push(`message ${key} twice`);
    byConn.set(key, wc.qpNum);
  }
  // One QP per client connection, each message on it.
  const qpOf = new Map();
  for (const [key, qpn] of byConn) {
    const c = key.split('/')[0];
    if (qpOf.has(c) && qpOf.get(c) !== qpn) problems.push(`connection ${c} on QPs ${qpOf.get(c)} and ${qpn}`);
    qpOf.set(c, qpn);
  }
  if (byConn.size !== total) problems.push(`${byConn.size} of ${total} messages`);
  if (new Set(qpOf.values()).size !== conns) problems.push(`${new Set(qpOf.values()).size} QPs for ${conns} connections`);

  // Done: one SEND on each connection (the clients wait for it, then disconnect).
  const done = Buffer.from('done');
  const dmr = srq.pd.regMr(done, Access.LOCAL_WRITE);
  for (const c of children) {
    c.qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: dmr.addr, length: 4, lkey: dmr.lkey }] });
    const [w] = await drain(c.sendCq, 1);
    if (w?.status !== WcStatus.SUCCESS) problems.push(`done to connection QP ${c.qp.qpNum}: status ${w?.status}`);
  }

  // What the device does next, on this SRQ.
  const probes = {};
  probes.postRecvOnSrqQp = codeOf(() => children[0].qp.postRecv({ wrId: 999, sgList: [{ addr: mr.addr, length: SLOT, lkey: mr.lkey }] }));
  probes.limitAfterEvent = valueOf(() => srq.query().srqLimit);
  probes.resize = codeOf(() => srq.modify({ maxWr: total * 2 }, SrqAttrMask.MAX_WR));
  probes.maxWrAfter = valueOf(() => srq.query().maxWr);
  probes.rearm = codeOf(() => srq.modify({ srqLimit: 1 }, SrqAttrMask.LIMIT));
  probes.limitRearmed = valueOf(() => srq.query().srqLimit);
  probes.destroyWhileUsed = codeOf(() => children[0].destroySrq());
  // A QP on the SRQ to ERR: the Last WQE Reached event, where the device raises it.
  const last = asyncEvent(ctx, [AsyncEventType.QP_LAST_WQE_REACHED], 5000);
  children[0].qp.modify({ qpState: QpState.ERR });
  const lastEv = await last;
  probes.lastWqe = lastEv === null ? null : { qpIsOurs: lastEv.qp === children[0].qp };
  const report = {
    device: ctx.device.name,
    srqAttr,
    completions: wcs.length,
    problems,
    limitEvent: ev === null ? null : { srqIsOurs: ev.srq === srq },
    probes,
  };
  for (const c of children) await c.disconnect().catch(() => {});
  for (const c of children) c.destroyQp();
  dmr.dereg();
  report.destroyAfter = codeOf(() => children[0].destroySrq());
  console.log(JSON.stringify(report));
  process.exit(problems.length === 0 && wcs.length === total && ev !== null ? 0 : 1);
}

async function client() {
  const ids = [];
  for (let i = 0; i < conns; i++) {
    const id = createId(null, null, PortSpace.TCP);
    await id.resolveAddr(null, { address, port });
    await id.resolveRoute();
    id.createQp(null, { cap: { ...cap, maxRecvWr: 2 } });
    const rbuf = Buffer.alloc(SLOT);
    const rmr = id.pd.regMr(rbuf, Access.LOCAL_WRITE);
    id.qp.postRecv({ wrId: 100, sgList: [{ addr: rmr.addr, length: SLOT, lkey: rmr.lkey }] });
    await id.connect({ ...conn, privateData: Buffer.from([i]) });
    ids.push(id);
  }
  const statuses = [];
  for (const [i, id] of ids.entries()) {
    const buf = Buffer.alloc(msgs * SLOT);
    const mr = id.pd.regMr(buf, Access.LOCAL_WRITE);
    const wrs = [];
    for (let j = 0; j < msgs; j++) {
      const n = buf.write(`c${i}m${j}`, j * SLOT);
      wrs.push({ wrId: j, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: mr.addr + j * SLOT, length: n, lkey: mr.lkey }] });
    }
    id.qp.postSend(wrs);
    const w = await drain(id.sendCq, msgs);
    statuses.push(w.map((x) => x.status));
  }
  // The server's "done" on each connection, then disconnect.
  const done = [];
  for (const id of ids) done.push((await drain(id.recvCq, 1)).map((x) => x.status)[0] ?? null);
  const ok = statuses.every((s) => s.length === msgs && s.every((x) => x === WcStatus.SUCCESS)) && done.every((x) => x === WcStatus.SUCCESS);
  console.log(JSON.stringify({ device: ids[0].qp.context.device.name, statuses, done }));
  for (const id of ids) await id.disconnect().catch(() => {});
  process.exit(ok ? 0 : 1);
}

await (role === 'server' ? server() : client());
