// Code that RsConn's latency path compiles keeps working, without being thrown away, when a
// bandwidth run first reaches the cases a latency run never does: a poll that asks for POLLOUT
// while bytes wait in the send buffer for target space, and a receive that takes part of a
// message. (V8 plants a deoptimisation on every operation that has no feedback when the function
// is compiled; the first time such an operation runs, the compiled code is discarded.) Checked
// with V8's own introspection in a child process (natives syntax is a command-line flag), along
// with the results the calls return.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

const PAIR = new URL('../../lib/rs-pair.js', import.meta.url).href;
const WAIT = new URL('../../lib/wait.js', import.meta.url).href;
const RS = new URL('../../../dist/rsocket/index.js', import.meta.url).href;

function child(body) {
  const src = `
    const { withRsPair } = await import(${JSON.stringify(PAIR)});
    const rs = await import(${JSON.stringify(RS)});
    const { RS_EAGAIN, POLLIN, POLLOUT, SOL_SOCKET, SO_RCVBUF, SO_SNDBUF } = rs;
    const opt = (f) => (%GetOptimizationStatus(f) & 16) !== 0;
    const { until } = await import(${JSON.stringify(WAIT)});
    const out = [];
    ${body}
    console.log(JSON.stringify(out));`;
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', src], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

test('a POLLOUT poll with bytes staged ahead runs the code compiled for POLLIN polls (V8)', { timeout: 40_000 }, () => {
  const out = child(`
    await withRsPair({ listener: [[SOL_SOCKET, SO_RCVBUF, 8192]], client: [[SOL_SOCKET, SO_SNDBUF, 32768]] }, async ({ c }) => {
      const ev = rs.RsConn.prototype.pollEvents;
      %PrepareFunctionForOptimization(ev);
      c.pollEvents(POLLIN); c.pollEvents(POLLIN);
      %OptimizeFunctionOnNextCall(ev);
      c.pollEvents(POLLIN);
      out.push(opt(ev));
      // The first POLLOUT poll, with room to send.
      out.push(c.pollEvents(POLLOUT | POLLIN) === POLLOUT);
      out.push(opt(ev));
      // The server does not read: past its window the client copies ahead (early staging) until
      // its send buffer is full.
      const data = Buffer.alloc(256 * 1024, 7);
      let taken = 0;
      for (;;) {
        const n = c.send(data, taken, data.length - taken);
        if (n === RS_EAGAIN || (taken += n) === data.length) break;
      }
      out.push(taken > 16 * 1024 && taken < data.length);
      out.push(c.pollEvents(POLLOUT | POLLIN));
      out.push(opt(ev));
    });`);
  assert.deepEqual(out, [true, true, true, true, 0, true]);
});

test('a receive that takes part of a message runs the code compiled for whole ones (V8)', { timeout: 40_000 }, () => {
  const out = child(`
    await withRsPair({}, async ({ c, s }) => {
      const buf = Buffer.alloc(256);
      const consume = Object.getPrototypeOf(s.rx).consume;
      %PrepareFunctionForOptimization(consume);
      const msg = Buffer.alloc(100);
      for (let i = 0; i < 3; i++) {
        msg.fill(i + 1);
        while (c.send(msg) === RS_EAGAIN) await c.poll(POLLOUT);
        await until(() => s.pollEvents(POLLIN) !== 0);
        if (i === 2) %OptimizeFunctionOnNextCall(consume);
        out.push(s.recv(buf, 0, 256));
      }
      out.push(opt(consume));
      // One 100-byte message taken in pieces of 30: 30, 30, 30, 10.
      msg.fill(9);
      while (c.send(msg) === RS_EAGAIN) await c.poll(POLLOUT);
      await until(() => s.pollEvents(POLLIN) !== 0);
      for (let i = 0; i < 4; i++) out.push(s.recv(buf, 0, 30), buf[0]);
      out.push(s.recv(buf, 0, 30) === RS_EAGAIN);
      out.push(opt(consume));
    });`);
  assert.deepEqual(out, [100, 100, 100, true, 30, 9, 30, 9, 30, 9, 10, 9, true, true]);
});
