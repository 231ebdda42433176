// What a kernel rxe receives from us: the IPv4 datagrams of the soft RoCE device leave with
// identification 0 and DF, and their ICRC is valid over the real IP header as the kernel wrote it
// (rxe computes the ICRC over the received header, so any other identification is a bad ICRC
// there). Captured on `lo` with tcpdump. Needs the package's netopt addon (built at install where
// a C compiler and Node's headers exist) and tcpdump.
import { PORT, wire, loDevice, v4GidIndex, udQp, ahTo, pollN, until, WrOpcode, SendFlags, Access, WcStatus } from '../../../lib/roce.js';
import dgram from 'node:dgram';
import { once } from 'node:events';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../../../lib/tools.js';
import { udpDatagrams } from '../../../lib/pcap.js';

const NETOPT = join(REPO_ROOT, 'native', 'build', 'netopt.node');
const haveTcpdump = spawnSync('tcpdump', ['--version']).status === 0;
const skip = !existsSync(NETOPT) ? 'the netopt addon is not built here (no C compiler or Node headers)' : !haveTcpdump ? 'tcpdump is not installed' : false;

/** tcpdump on lo for UDP to our private RoCE port; resolves once it listens. */
async function capture(file) {
  const p = spawn('tcpdump', ['-i', 'lo', '-Z', 'root', '--immediate-mode', '-U', '-n', '-s', '2048', '-w', file, 'udp', 'dst', 'port', String(PORT)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`tcpdump did not start: ${err}`)), 10_000);
    p.stderr.on('data', (d) => {
      err += d;
      if (/listening on/.test(err)) {
        clearTimeout(t);
        resolve();
      }
    });
    p.once('exit', (c) => reject(new Error(`tcpdump exited ${c}: ${err}`)));
  });
  return p;
}

test('IPv4 datagrams leave with identification 0 and DF, their ICRC valid over the real header', { skip, timeout: 30_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-ipid-'));
  const file = join(dir, 'lo.pcap');
  const dump = await capture(file);
  try {
    // A peer that is not one of ours (127.0.0.2 is no device address): the datagrams take the
    // kernel's path, as they do to a kernel rxe.
    const peer = dgram.createSocket('udp4');
    peer.bind(PORT, '127.0.0.2');
    await once(peer, 'listening');
    let received = 0;
    peer.on('message', () => received++);
    const ctx = loDevice().open();
    const pd = ctx.allocPd();
    const cq = ctx.createCq(32);
    const a = udQp(pd, cq);
    const sgid = v4GidIndex(ctx);
    const ah = ahTo(pd, Uint8Array.of(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 2), sgid);
    const tx = Buffer.alloc(1000, 0x5a);
    const smr = pd.regMr(tx, Access.LOCAL_WRITE);
    const N = 3;
    for (let i = 0; i < N; i++) {
      a.postSend({
        wrId: i,
        opcode: i === 1 ? WrOpcode.SEND_WITH_IMM : WrOpcode.SEND,
        immData: 0x01020304,
        sendFlags: SendFlags.SIGNALED,
        sgList: [{ addr: smr.addr, length: 100 * (i + 1), lkey: smr.lkey }],
        ud: { ah, remoteQpn: 0x1234, remoteQkey: 0x11111111 },
      });
    }
    const wcs = await pollN(cq, N);
    assert.equal(wcs.length, N, 'every send completed');
    for (const wc of wcs) assert.equal(wc.status, WcStatus.SUCCESS);
    await until(() => received === N, 3000, () => `the peer to get all ${N} datagrams (it got ${received})`);
    peer.close();
    a.destroy();
    // Let tcpdump write what it saw.
    await new Promise((r) => setTimeout(r, 300));
  } finally {
    dump.kill('SIGINT');
    await new Promise((r) => dump.once('exit', r));
  }
  const seen = udpDatagrams(file).filter((d) => d.family === 4 && d.dport === PORT);
  rmSync(dir, { recursive: true, force: true });
  assert.equal(seen.length, 3, `captured ${seen.length} datagrams to port ${PORT}`);
  for (const d of seen) {
    const ip = d.ipHeader;
    const id = ip.readUInt16BE(4);
    const flags = ip.readUInt16BE(6);
    assert.equal(id, 0, 'IPv4 identification 0');
    assert.equal(flags, 0x4000, 'DF set, not a fragment');
    const net = { family: 4, src: d.src, dst: d.dst, sport: d.sport, dport: d.dport, tos: ip[1], ttl: ip[8], ipId: id, ipFlags: flags };
    assert.ok(wire.icrcVerify(net, d.payload, 0, d.payload.length), 'ICRC valid over the header the kernel wrote');
  }
});
