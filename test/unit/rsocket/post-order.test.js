// Large data chunks are posted each with its own DATA message right behind its RDMA WRITE (RsConn's
// POST_ALONE_MIN): the receiver learns of data only from the messages, so a batch of large WRITEs
// followed by their messages would hide the first half of its buffer until the second had arrived
// too. Checked on the work requests the sending rsocket hands to ibv_post_send, and on the bytes
// that arrive.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as rs from '../../../dist/rsocket/index.js';
import { WrOpcode } from '../../../dist/verbs/index.js';
import { withRsPair, sendAll, recvAll, fixed } from '../../lib/rs-pair.js';

const { SOL_SOCKET, SO_RCVBUF, SO_SNDBUF } = rs;
const T = { timeout: 30_000 };
const KiB = 1024;

/** Record every work request the client posts: `{ post, opcode, len }`, `post` counting ibv_post_send calls. */
function recordPosts(conn) {
  const qp = conn.qp;
  assert.ok(qp && typeof qp.postSend === 'function', 'the rsocket has a QP');
  const wrs = [];
  let post = 0;
  const orig = qp.postSend.bind(qp);
  qp.postSend = (list) => {
    post++;
    for (const wr of Array.isArray(list) ? list : [list]) {
      wrs.push({ post, opcode: wr.opcode, len: wr.sgList.reduce((n, s) => n + s.length, 0) });
    }
    return orig(list);
  };
  return wrs;
}

const withPair = (fn) => withRsPair({ listener: [[SOL_SOCKET, SO_RCVBUF, 512 * KiB]], client: [[SOL_SOCKET, SO_SNDBUF, 512 * KiB]] }, fn);

test('each large DATA write is followed directly by its message; the bytes arrive intact', T, () =>
  withPair(async ({ c, s }) => {
    const wrs = recordPosts(c);
    const data = randomBytes(4 * 1024 * KiB);
    const [got] = await Promise.all([recvAll(s, data.length, fixed(256 * KiB)), sendAll(c, data, fixed(1024 * KiB))]);
    assert.ok(got.equals(data), 'client -> server intact');
    const large = wrs.filter((w) => w.opcode === WrOpcode.RDMA_WRITE && w.len >= 32 * KiB);
    assert.ok(large.length >= 8, `${large.length} large data writes`);
    for (let i = 0; i < wrs.length; i++) {
      const w = wrs[i];
      if (w.opcode !== WrOpcode.RDMA_WRITE || w.len < 32 * KiB) continue;
      const next = wrs[i + 1];
      assert.ok(next, 'a message follows the last write');
      assert.equal(next.opcode, WrOpcode.SEND, `work request ${i + 1} (after a ${w.len}-byte write) is its message`);
      assert.equal(next.len, 4, 'a 4-byte DATA message');
      assert.equal(next.post, w.post, 'posted together with its write');
    }
  }));
