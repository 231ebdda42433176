// The interface life of one soft device, run by test/compliance/port-events.test.js inside a
// network namespace of its own (with its own sysfs): a veth pair v0/v1, the device of the given
// provider bound to v0, its context's async events and the CM events of a bound id and of a
// connected id (to a server on loopback) recorded while v0 loses its carrier, goes down and up,
// gains and loses an address, changes its hardware address and is deleted. Prints one JSON
// object: what was observed after each step.
//
//   node port-scenario.js <provider>        (as root, in a namespace of its own)
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as pkg from '../../dist/index.js';
import { until, sleep } from './wait.js';

const { getDeviceList, createId, createEventChannel, PortSpace, AsyncEventType, rdmaEventStr, iwarp, roce } = pkg;
const provider = process.argv[2];
const POLL_MS = 20;
// Long enough for several polls: a change not reported by then is not reported.
const SETTLE_MS = 8 * POLL_MS;

const ip = (...a) => execFileSync('ip', a, { stdio: ['ignore', 'ignore', 'pipe'] });
iwarp.configure({ portPollMs: POLL_MS });
roce.configureDevice({ portPollMs: POLL_MS });

ip('link', 'add', 'v0', 'type', 'veth', 'peer', 'name', 'v1');
ip('addr', 'add', '10.9.0.1/24', 'dev', 'v0');
ip('addr', 'add', 'fd00:9::1/64', 'dev', 'v0', 'nodad');
ip('addr', 'add', '10.9.0.2/24', 'dev', 'v1');
ip('link', 'set', 'v0', 'up');
ip('link', 'set', 'v1', 'up');

const devOf = (ifname) => getDeviceList().find((d) => d.provider === provider && d.ifname === ifname);
await until(() => devOf('v0') !== undefined, 5000, 'the device of v0');
const dev = devOf('v0');
const lo = devOf('lo');
const ctx = dev.open();
const out = { device: dev.name, transport: dev.transportType, steps: [] };
// Whether the kernel keeps v0's IPv6 addresses when it goes down (by default it drops them).
out.keepV6 = (() => {
  try {
    return readFileSync('/proc/sys/net/ipv6/conf/v0/keep_addr_on_down', 'utf8').trim() !== '0';
  } catch {
    return false;
  }
})();

// The context's async events, as a reader waiting on them sees them.
const asyncLog = [];
const reader = (async () => {
  for (;;) {
    let ev;
    try {
      ev = await ctx.getAsyncEvent(AbortSignal.timeout(30_000));
    } catch {
      return;
    }
    asyncLog.push(AsyncEventType[ev.type]);
    ctx.ackAsyncEvent(ev);
    if (ev.type === AsyncEventType.DEVICE_FATAL) return;
  }
})();

// CM: a bound id, and a connection from v0's address to a server on loopback.
const ch = createEventChannel();
const cmLog = [];
const names = new Map();
const bound = createId(ch, null, PortSpace.TCP, { device: dev.name });
names.set(bound, 'bound');
bound.bindAddr({ address: '10.9.0.1', port: 0 });
const server = createId(null, null, PortSpace.TCP, { device: lo.name });
server.bindAddr({ address: '0.0.0.0', port: 0 });
await server.listen(4);
const accepted = (async () => {
  const child = await server.getRequest();
  child.createQp(null, {});
  await child.accept();
  return child;
})();
const client = createId(null, null, PortSpace.TCP, { device: dev.name });
await client.resolveAddr({ address: '10.9.0.1', port: 0 }, { address: '127.0.0.1', port: server.srcPort });
await client.resolveRoute();
client.createQp(null, {});
await client.connect();
const child = await accepted;
await client.migrate(ch);
await child.migrate(ch);
names.set(client, 'client');
names.set(child, 'server-side');
const cmReader = (async () => {
  for (;;) {
    let ev;
    try {
      ev = await ch.getEvent(AbortSignal.timeout(30_000));
    } catch {
      return;
    }
    cmLog.push(`${names.get(ev.id) ?? '?'} ${rdmaEventStr(ev.event)}`);
    ev.ack();
  }
})();

function gids() {
  return ctx.queryGidTable().map((e) => `${e.gidIndex}=${Buffer.from(e.gid).toString('hex')}`);
}
function portNow() {
  try {
    const p = ctx.queryPort(1);
    return { state: p.state, physState: p.physState };
  } catch (e) {
    return { error: e.code };
  }
}
async function step(name, act, extra = () => ({})) {
  asyncLog.length = 0;
  cmLog.length = 0;
  act();
  await sleep(SETTLE_MS);
  out.steps.push({ step: name, async: [...asyncLog], cm: [...cmLog].sort(), port: portNow(), ...extra() });
}

// Where the device has UD QPs: a datagram to v1's address, sent while v0 is up and while down.
let ud = null;
try {
  const pd = ctx.allocPd();
  const cq = ctx.createCq(8);
  const qp = pd.createQp({ qpType: pkg.QpType.UD, sendCq: cq, recvCq: cq, cap: { maxSendWr: 4, maxRecvWr: 1, maxInlineData: 64 } });
  qp.modify({ qpState: pkg.QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: 0x11111111 });
  qp.modify({ qpState: pkg.QpState.RTR });
  qp.modify({ qpState: pkg.QpState.RTS, sqPsn: 0 });
  const sgid = ctx.queryGidTable().find((e) => Buffer.from(e.gid).toString('hex').endsWith('ffff0a090001')).gidIndex;
  const dgid = Uint8Array.from(Buffer.from('00000000000000000000ffff0a090002', 'hex'));
  const ah = pd.createAh({ isGlobal: true, portNum: 1, grh: { dgid, flowLabel: 0, sgidIndex: sgid, hopLimit: 64, trafficClass: 0 } });
  const mr = pd.regMr(Buffer.alloc(64), pkg.Access.LOCAL_WRITE);
  ud = { pd, cq, qp, ah, mr };
} catch (e) {
  if (e.code !== 'EOPNOTSUPP') throw e;
}
async function udSend() {
  ud.qp.postSend({ wrId: 5, opcode: pkg.WrOpcode.SEND, sendFlags: pkg.SendFlags.SIGNALED, sgList: [{ addr: ud.mr.addr, length: 8, lkey: ud.mr.lkey }], ud: { ah: ud.ah, remoteQpn: 0x11, remoteQkey: 0x11111111 } });
  let wc = [];
  await until(() => (wc = ud.cq.poll(1)).length === 1, 3000, 'the UD send completion');
  return wc[0].status;
}

await sleep(SETTLE_MS);
if (ud !== null) out.udUp = await udSend();
out.start = { port: portNow(), gids: gids(), qp: client.qp.state, activeMtu: ctx.queryPort(1).activeMtu };
await step('peer down', () => ip('link', 'set', 'v1', 'down'));
await step('peer up', () => ip('link', 'set', 'v1', 'up'));
await step('down', () => ip('link', 'set', 'v0', 'down'), () => {
  // A device whose interface is down takes no new id on its address.
  let bind = 'bound';
  const id = createId(null, null, PortSpace.TCP, { device: dev.name });
  try {
    id.bindAddr({ address: '10.9.0.1', port: 0 });
  } catch (e) {
    bind = e.code;
  }
  void id.destroy();
  return { qp: client.qp.state, bind, gids: gids() };
});
if (ud !== null) out.udDown = await udSend();
await step('up', () => ip('link', 'set', 'v0', 'up'), () => ({ gids: gids() }));
const before = gids();
await step('address added', () => ip('addr', 'add', '10.9.1.1/24', 'dev', 'v0'), () => ({ gids: gids() }));
await step('address removed', () => ip('addr', 'del', '10.9.1.1/24', 'dev', 'v0'), () => ({ gids: gids() }));
out.gidsBack = JSON.stringify(gids()) === JSON.stringify(before);
await step('mtu', () => ip('link', 'set', 'v0', 'mtu', '9000'), () => ({ activeMtu: ctx.queryPort(1).activeMtu }));
await step('hardware address', () => ip('link', 'set', 'v0', 'address', '02:11:22:33:44:55'), () => ({ gids: gids() }));
// A receive posted before the device goes completes once, flushed, with the QP's move to ERR.
client.qp.postRecv({ wrId: 77n, sgList: [] });
await step('deleted', () => ip('link', 'del', 'v0'), () => {
  let pd = 'allocated';
  try {
    ctx.allocPd();
  } catch (e) {
    pd = e.code;
  }
  const flushed = client.recvCq.poll(8).map((wc) => `${wc.wrId} ${wc.status}`);
  return { pd, qp: client.qp.state, boundState: bound.state, clientState: client.state, listed: devOf('v0') !== undefined, flushed };
});

await sleep(SETTLE_MS);
out.flushedLater = client.recvCq.poll(8).length;

// The listener on loopback still takes connections.
try {
  const again = createId(null, null, PortSpace.TCP, { device: lo.name });
  const acc = (async () => {
    const c = await server.getRequest();
    c.createQp(null, {});
    await c.accept();
    return c;
  })();
  await again.resolveAddr(null, { address: '127.0.0.1', port: server.srcPort });
  await again.resolveRoute();
  again.createQp(null, {});
  await again.connect();
  const c = await acc;
  out.serverAfter = c.state;
  for (const id of [again, c]) {
    id.destroyQp();
    await id.destroy();
  }
} catch (e) {
  out.serverAfter = e.code ?? String(e);
}

if (ud !== null) {
  ud.qp.destroy();
  ud.ah.destroy();
  ud.mr.dereg();
  ud.cq.destroy();
  ud.pd.dealloc();
}

// Every id can still be destroyed.
for (const id of [client, child]) id.destroyQp();
for (const id of [bound, client, child, server]) await id.destroy();
ch.destroy();
await Promise.race([reader, sleep(100)]);
await Promise.race([cmReader, sleep(100)]);
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
