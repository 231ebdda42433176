// Code that the iWARP transport compiles while a connection carries only large RDMA WRITEs (a
// riostream or rstream bandwidth row) keeps working, without being thrown away, when the first
// small message comes after them (the tools' 16-byte sync before a timed block): the sender's
// staging of a small message's FPDUs, the receiver's FPDU header handling and its decoder. (V8
// plants a deoptimisation on every operation that has no feedback when the function is compiled;
// the first time such an operation runs, the compiled code is discarded and the block that
// follows runs unoptimised until it is compiled again.) Checked with V8's own introspection in a
// child process (natives syntax is a command-line flag), along with the bytes that arrive.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

const url = (p) => JSON.stringify(new URL(p, import.meta.url).href);

test('a small message after a run of large RDMA WRITEs runs the code compiled for the run; the receiver keeps its hidden class (V8)', { timeout: 60_000 }, () => {
  const src = `
    const { withRsPair } = await import(${url('../../../lib/rs-pair.js')});
    const rs = await import(${url('../../../../dist/rsocket/index.js')});
    const { QpRx } = await import(${url('../../../../dist/transport/iwarp/qp-rx.js')});
    const { QpTx } = await import(${url('../../../../dist/transport/iwarp/qp-tx.js')});
    const { FpduDecoder } = await import(${url('../../../../dist/wire/iwarp/fpdu-decoder.js')});
    const { RS_EAGAIN, POLLIN, POLLOUT, PROT_WRITE, SOL_RDMA, RDMA_IOMAPSIZE } = rs;
    // The header step is QpRx.onHeader, small enough to be compiled into feed, and the opcode's
    // handler it calls through the table: hdrWrite for the WRITEs.
    const fns = { flushStage: QpTx.prototype.flushStage, hdrWrite: QpRx.prototype.hdrWrite, fast: QpRx.prototype.fast, feed: FpduDecoder.prototype.feed };
    const opt = () => Object.values(fns).map((f) => (%GetOptimizationStatus(f) & 16) !== 0);
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    const out = [];
    const iomap = [[SOL_RDMA, RDMA_IOMAPSIZE, 1]];
    await withRsPair({ listener: iomap, client: iomap }, async ({ c, s }) => {
      const SIZE = 65536;
      const target = Buffer.alloc(SIZE);
      s.riomap(target, PROT_WRITE, 0);
      // The mapping reaches the client with the server's next send.
      while (s.send(Buffer.from('map!')) === RS_EAGAIN) await s.poll(POLLOUT, 1000);
      const four = Buffer.alloc(4);
      while (c.recv(four) === RS_EAGAIN) await c.poll(POLLIN, 1000);
      const data = Buffer.alloc(SIZE);
      let mark = 0;
      // n writes of the whole mapping, the last byte of each a new mark; then wait until the last
      // one has landed.
      const bulk = async (n) => {
        for (let i = 0; i < n; ) {
          data.fill(i & 0x7f, 0, SIZE - 1);
          data[SIZE - 1] = mark = (mark + 1) & 0xff;
          const r = c.riowrite(data, 0, SIZE, 0);
          if (r === SIZE) i++;
          else if (r === RS_EAGAIN) await c.poll(POLLOUT);
          else throw new Error('riowrite took part of the buffer: ' + r);
        }
        for (let k = 0; k < 5000 && target[SIZE - 1] !== mark; k++) await sleep(1);
        return target[SIZE - 1] === mark && target[0] === ((n - 1) & 0x7f);
      };
      // An object made now has the hidden class the receiver's QpRx has now; a field of it that
      // changes representation later (a double where a small integer was) moves the QpRx to a new
      // hidden class, and the feedback and code for the old one no longer apply.
      const twin = new QpRx(s.qp, 8192);
      out.push(%HaveSameMap(twin, s.qp.rx));
      for (const f of Object.values(fns)) %PrepareFunctionForOptimization(f);
      out.push(await bulk(40));
      for (const f of Object.values(fns)) %OptimizeFunctionOnNextCall(f);
      out.push(await bulk(8));
      out.push(opt());
      // 16 bytes each way, the client first.
      const msg = Buffer.alloc(16, 0x73);
      const got = Buffer.alloc(16);
      const exchange = async (from, to) => {
        while (from.send(msg) === RS_EAGAIN) await from.poll(POLLOUT);
        let n = 0;
        while (n < 16) {
          const r = to.recv(got, n, 16 - n);
          if (r === RS_EAGAIN) await to.poll(POLLIN);
          else n += r;
        }
        return got.equals(msg);
      };
      out.push(await exchange(c, s), await exchange(s, c));
      out.push(await bulk(8));
      out.push(opt());
      out.push(%HaveSameMap(twin, s.qp.rx));
    });
    console.log(JSON.stringify(out));`;
  // Feedback from each function's first call, as rstream and riostream have it (eagerFeedback).
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '--no-lazy-feedback-allocation', '--input-type=module', '-e', src], { encoding: 'utf8', timeout: 50_000 });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout.trim().split('\n').pop());
  // [same class, bulk ok, bulk ok, [optimised x4], exchange ok x2, bulk ok, [still optimised x4],
  //  still the same class]
  assert.deepEqual(out, [true, true, true, [true, true, true, true], true, true, true, [true, true, true, true], true]);
});
