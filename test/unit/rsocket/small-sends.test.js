// Small (inline) sends: each one an RDMA WRITE from a scratch slot plus its message SEND, with
// credit updates (their SGEs written inline from scratch slots too) in between. No slot may be
// reused while a work request still names it: every byte must arrive, in order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as rs from '../../../dist/rsocket/index.js';
import { withRsPair, sendAll as sendAllIn, recvAll as recvAllIn, upTo } from '../../lib/rs-pair.js';

const { SOL_SOCKET, SO_RCVBUF } = rs;
const T = { timeout: 60_000 };

// Small receive buffers: frequent grants (inline SGE writes) between the small messages.
const PAIR = { listener: [[SOL_SOCKET, SO_RCVBUF, 4096]], client: [[SOL_SOCKET, SO_RCVBUF, 4096]] };
/** Send `buf` in sends of 1..`max` bytes. */
const sendAll = (conn, buf, max) => sendAllIn(conn, buf, upTo(max));
const recvAll = (conn, len) => recvAllIn(conn, len, upTo(200));

test('thousands of 1..96-byte sends both ways at once arrive intact and in order', T, () =>
  withRsPair(PAIR, async ({ c, s }) => {
    const a = randomBytes(200_000);
    const b = randomBytes(150_000);
    const [gotA, gotB] = await Promise.all([recvAll(s, a.length), recvAll(c, b.length), sendAll(c, a, 96), sendAll(s, b, 96)]);
    assert.ok(gotA.equals(a), 'client -> server intact');
    assert.ok(gotB.equals(b), 'server -> client intact');
  }));

test('a ping-pong of small messages with a burst of them now and then', T, () =>
  withRsPair(PAIR, async ({ c, s }) => {
    for (let i = 0; i < 300; i++) {
      const k = i % 50 === 0 ? 40 : 1;
      const msgs = Array.from({ length: k }, () => randomBytes(1 + Math.floor(Math.random() * 64)));
      const all = Buffer.concat(msgs);
      for (const m of msgs) await sendAll(c, m, m.length);
      const got = await recvAll(s, all.length);
      assert.ok(got.equals(all), `round ${i}: server got what was sent`);
      await sendAll(s, got, 64);
      assert.ok((await recvAll(c, all.length)).equals(all), `round ${i}: echoed back intact`);
    }
  }));
