// riowrite posts up to 1 MiB (RDMACM_RS_RIO_MAX_XFER) as one RDMA WRITE when the send buffer has
// the room: no message follows a riowrite chunk and no target SGE bounds it, so one WRITE per MiB
// instead of rsend's 512 KiB chunks. Checked on the work requests the rsocket hands to
// ibv_post_send, and on the bytes that land in the peer's mapping.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as rs from '../../../dist/rsocket/index.js';
import { WrOpcode } from '../../../dist/verbs/index.js';
import { withRsPair } from '../../lib/rs-pair.js';

const { RS_EAGAIN, POLLIN, POLLOUT, PROT_WRITE, SOL_RDMA, RDMA_IOMAPSIZE, SOL_SOCKET, SO_SNDBUF } = rs;
const MiB = 1024 * 1024;

test('a 1 MiB riowrite into a free 1 MiB send buffer is one RDMA WRITE; 4 MiB land intact', { timeout: 30_000 }, () =>
  withRsPair({ listener: [[SOL_RDMA, RDMA_IOMAPSIZE, 1]], client: [[SOL_RDMA, RDMA_IOMAPSIZE, 1], [SOL_SOCKET, SO_SNDBUF, MiB / 2]] }, async ({ c, s }) => {
    const target = Buffer.alloc(4 * MiB);
    s.riomap(target, PROT_WRITE, 0);
    // The mapping reaches the client before the server's next send.
    while (s.send(Buffer.from('sync')) === RS_EAGAIN) await s.poll(POLLOUT, 1000);
    const got = Buffer.alloc(4);
    while (c.recv(got) === RS_EAGAIN) await c.poll(POLLIN, 1000);

    const posts = [];
    const qp = c.qp;
    const orig = qp.postSend.bind(qp);
    qp.postSend = (list) => {
      for (const wr of Array.isArray(list) ? list : [list]) {
        if (wr.opcode === WrOpcode.RDMA_WRITE) posts.push(wr.sgList.reduce((n, g) => n + g.length, 0));
      }
      return orig(list);
    };
    const src = randomBytes(4 * MiB);
    const first = c.riowrite(src, 0, MiB, 0);
    assert.equal(first, MiB, 'the whole MiB taken at once');
    assert.deepEqual(posts, [MiB], 'as one RDMA WRITE');
    for (let off = MiB; off < src.length; ) {
      const n = c.riowrite(src, off, src.length - off, off);
      if (n === RS_EAGAIN) await c.poll(POLLOUT, 1000);
      else if (n > 0) off += n;
      else assert.fail(`riowrite returned ${n}`);
    }
    for (const n of posts) assert.ok(n <= MiB, `${n}-byte chunk`);
    const t0 = Date.now();
    while (!target.equals(src) && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 10));
    assert.ok(target.equals(src), 'every byte in the peer mapping');
  }));
