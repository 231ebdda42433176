// Every librdmacm tool's traffic, captured (RDMA_PCAP) on each soft device that serves it and
// decoded by tshark with no malformed packet and no expert error: the connection tools (ucmatose,
// rdma_server/rdma_client, riostream) over the soft iWARP and RoCE devices, cmtime over RoCE. rping,
// rstream, ibv_rc_pingpong: test/e2e/capture.test.js; udaddy, ib_send_lat, ibv_ud_pingpong between
// two hosts: test/e2e/capture-kernel.test.js. Skips loudly without tshark.
import test from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { NO_TSHARK, captured, decodesCleanly, fields } from '../lib/capture.js';
import { freePort } from '../lib/ports.js';
import { getDeviceList } from '../../dist/index.js';

const devices = new Set(getDeviceList().map((d) => d.name));

/** The tools, their server and client arguments for a port. */
const TOOLS = [
  { name: 'ucmatose', server: (p) => ['-b', '127.0.0.1', '-p', p, '-C', '4'], client: (p) => ['-s', '127.0.0.1', '-p', p, '-C', '4'] },
  { name: 'rdma_server', clientTool: 'rdma_client', server: (p) => ['-s', '127.0.0.1', '-p', p], client: (p) => ['-s', '127.0.0.1', '-p', p] },
  // cmtime's -p is its out-of-band TCP port (the CM listens on its own): no wait for a CM listener.
  // On iWARP its no-QPs run fails in rdma_connect as rdma-core's does (test/e2e/cmtime.test.js).
  { name: 'cmtime', oob: true, only: 'rxe_lo', server: (p) => ['-b', '127.0.0.1', '-C', '127.0.0.1', '-p', p, '-c', '4', '-L'], client: (p) => ['-b', '127.0.0.1', '-C', '127.0.0.1', '-p', p, '-c', '4'] },
  { name: 'riostream', server: (p) => ['-b', '127.0.0.1', '-p', p, '-S', '1000', '-C', '10'], client: (p) => ['-s', '127.0.0.1', '-p', p, '-S', '1000', '-C', '10'] },
];

/** What every frame of a capture of `dev` is, by tshark's protocol stack. */
const STACK = { rxe_lo: /^eth:ethertype:ip:udp:infiniband/, siw_lo: /^eth:ethertype:ip:tcp/ };

for (const dev of ['siw_lo', 'rxe_lo']) {
  for (const t of TOOLS) {
    if (t.only !== undefined && t.only !== dev) continue;
    const skip = NO_TSHARK || (devices.has(dev) ? false : `no ${dev} device`);
    test(`${t.name} over ${dev}, captured: every frame decodes cleanly, the device's protocol in each`, { skip, timeout: 120_000 }, async () => {
      const port = String(await freePort());
      const { files, dir } = await captured(t.name, t.server(port), t.client(port), { env: { RDMACM_DEVICE: dev }, roce: dev === 'rxe_lo' && !t.oob, port: Number(port), clientTool: t.clientTool ?? t.name });
      try {
        for (const f of files) {
          decodesCleanly(f);
          const rows = fields(f, ['frame.protocols']);
          assert.ok(rows.length >= 4, `${f}: ${rows.length} frames`);
          for (const [p] of rows) assert.match(p, STACK[dev], `${f}: ${p}`);
          if (dev === 'siw_lo') assert.ok(rows.some(([p]) => /iwarp_mpa/.test(p)), `${f}: MPA frames`);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
}
