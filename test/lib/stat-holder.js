// A process for the rdmacm-stat tests. `node stat-holder.js hold N S`: on the device RDMACM_DEVICE
// pins, a connected pair of RC QPs (three CM ids: the listener and both ends), N Sends of S bytes
// from the first QP to the second and one extra MR of 4096 bytes with LOCAL_WRITE|REMOTE_READ;
// then one line `{"ready":true,"pid":...}` and it waits until its stdin closes.
// `node stat-holder.js mute`: listens on this pid's stat name and never answers.
// `node stat-holder.js ask PID`: connects to PID's stat name, sends the query and prints what comes back.
import net from 'node:net';
import { WrOpcode, SendFlags, Access } from '../../dist/index.js';
import { rcPair, reap } from './cm-rc-pair.js';

const [mode, ...args] = process.argv.slice(2);

function untilStdinCloses(fn) {
  process.stdin.resume();
  process.stdin.on('end', fn);
  process.stdin.on('close', fn);
}

if (mode === 'hold') {
  const n = Number(args[0] ?? 0);
  const s = Number(args[1] ?? 1);
  const { a, b, close } = await rcPair({ send: Math.max(n, 1), recv: Math.max(n, 1) });
  const src = a.pd.regMr(Buffer.alloc(s, 7), 0);
  const dst = b.pd.regMr(Buffer.alloc(s * Math.max(n, 1)), Access.LOCAL_WRITE);
  a.pd.regMr(Buffer.alloc(4096), Access.LOCAL_WRITE | Access.REMOTE_READ);
  for (let i = 0; i < n; i++) b.qp.postRecv({ wrId: i, sgList: [{ addr: dst.addr + i * s, length: s, lkey: dst.lkey }] });
  for (let i = 0; i < n; i++) a.qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: [{ addr: src.addr, length: s, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED });
  await reap(a.sendCq, n);
  await reap(b.recvCq, n);
  process.stdout.write(`${JSON.stringify({ ready: true, pid: process.pid, lqpn: [a.qp.qpNum, b.qp.qpNum] })}\n`);
  untilStdinCloses(() => close().then(() => process.exit(0)));
} else if (mode === 'mute') {
  const srv = net.createServer(() => {});
  srv.listen({ path: `\0rdmacm-stat/${process.pid}` }, () => process.stdout.write(`${JSON.stringify({ ready: true, pid: process.pid })}\n`));
  untilStdinCloses(() => process.exit(0));
} else if (mode === 'ask') {
  const sock = net.connect({ path: `\0rdmacm-stat/${args[0]}` });
  let got = '';
  sock.on('connect', () => sock.write('{"v":1}\n'));
  sock.on('data', (b) => (got += b));
  sock.on('end', () => process.stdout.write(got));
  sock.on('error', (e) => process.stdout.write(`error ${e.code}\n`));
  setTimeout(() => process.exit(2), 5000).unref();
} else {
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}
