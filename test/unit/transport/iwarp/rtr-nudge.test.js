// Linux siw as a P2P responder can miss our RTR (it installs its RTR reader only after sending the
// MPA Reply; bytes landing in between stay unread until more arrive). While the responder stays
// silent, our initiator repeats a zero-length RDMA Write: after 50 ms, then at growing intervals;
// once the responder has sent anything it stops. Played here by a raw TCP responder.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { existsSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { sleep } from '../../../lib/wait.js';

// The responder here is on loopback, where nudges go only when this kernel runs siw: force them
// (RDMACM_IWARP_RTR_NUDGE_LOOPBACK is read when the library loads).
process.env.RDMACM_IWARP_RTR_NUDGE_LOOPBACK = '1';

const { CmEventType } = await import('../../../../dist/index.js');
const { activeConnect } = await import('../../../lib/cm-rc-pair.js');
const { encodeMpaStartFrame, decodeMpaStartFrame, encodeFpdu } = await import('../../../../dist/wire/index.js');

const reply = () => encodeMpaStartFrame({ type: 'reply', markers: false, crc: false, reject: false, enhanced: true, rev: 2, ird: 1, ord: 1, p2p: true, rtrSend: false, rtrWrite: true, rtrRead: false, privateData: new Uint8Array(0) });

/** A P2P responder that answers with a Write RTR, then logs each zero-length Write's arrival time. */
async function responder() {
  const rtrs = [];
  let sock = null;
  const srv = net.createServer((s) => {
    sock = s;
    s.on('error', () => {});
    let acc = Buffer.alloc(0);
    let inRdma = false;
    s.on('data', (d) => {
      acc = Buffer.concat([acc, d]);
      if (!inRdma) {
        const r = decodeMpaStartFrame(acc, 'request');
        if (!('frame' in r)) return;
        inRdma = true;
        acc = acc.subarray(r.length);
        s.write(reply());
      }
      // FPDUs: 2-byte ULPDU length, ULPDU, pad to 4, 4-byte CRC. A zero-length Write has a
      // 14-byte ULPDU (DDP tagged header) and RDMAP opcode 0.
      while (acc.length >= 2) {
        const len = acc.readUInt16BE(0);
        const total = (2 + len + 3 & ~3) + 4;
        if (acc.length < total) break;
        if (len === 14 && (acc[3] & 0x0f) === 0) rtrs.push(Date.now());
        acc = acc.subarray(total);
      }
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return { port: srv.address().port, rtrs, sock: () => sock, close: () => srv.close() };
}

async function connect(port) {
  const { id, ev, close } = await activeConnect(port);
  assert.equal(ev.event, CmEventType.ESTABLISHED);
  ev.ack();
  return async () => {
    await id.disconnect().catch(() => {});
    await close();
  };
}

test('a silent P2P responder gets the RTR again, at 50 ms and then at growing intervals', async () => {
  const r = await responder();
  const done = await connect(r.port);
  const t0 = Date.now();
  await sleep(1300);
  await done();
  r.close();
  // The RTR itself, then nudges at ~50, ~250, ~1050 ms.
  assert.ok(r.rtrs.length >= 4, `zero-length Writes seen: ${r.rtrs.length}`);
  const gaps = r.rtrs.slice(1).map((t, i) => t - r.rtrs[i]);
  assert.ok(gaps[1] > gaps[0] && gaps[2] > gaps[1], `intervals grow: ${gaps.join(', ')} (started ${r.rtrs[0] - t0} ms)`);
});

test('the nudges stop once the responder has sent an FPDU', async () => {
  const r = await responder();
  const done = await connect(r.port);
  await sleep(80); // RTR + the first nudge
  // The responder speaks: a zero-length RDMA Write of its own.
  r.sock().write(encodeFpdu({ opcode: 0, stag: 0, to: 0 }));
  await sleep(50);
  const seen = r.rtrs.length;
  await sleep(400);
  await done();
  r.close();
  assert.ok(seen >= 2, `RTR and a nudge before the responder spoke: ${seen}`);
  assert.equal(r.rtrs.length, seen, 'no more nudges after the responder spoke');
});

test('a peer on this host is not nudged when this kernel has no siw (nor with RDMACM_IWARP_RTR_NUDGE_LOOPBACK=0)', async (t) => {
  const siw = existsSync('/sys/module/siw');
  t.diagnostic(`siw module in this kernel: ${siw}`);
  // The default policy where there is no siw, the explicit off switch where there is: in a child
  // process, since the library reads the setting when it loads.
  const env = { ...process.env };
  if (siw) env.RDMACM_IWARP_RTR_NUDGE_LOOPBACK = '0';
  else delete env.RDMACM_IWARP_RTR_NUDGE_LOOPBACK;
  const r = await responder();
  const lib = new URL('../../../lib/cm-rc-pair.js', import.meta.url).href;
  const code = `const { activeConnect } = await import(${JSON.stringify(lib)});
    const { ev } = await activeConnect(${r.port});
    ev.ack();
    setTimeout(() => process.exit(ev.event), 400);`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { env, stdio: 'inherit' });
  const kill = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const status = await new Promise((res) => child.on('exit', res));
  clearTimeout(kill);
  r.close();
  assert.equal(status, CmEventType.ESTABLISHED, 'the child connected');
  assert.equal(r.rtrs.length, 1, `only the RTR itself: ${r.rtrs.length} zero-length Writes`);
});
