// The send ring of a large SO_SNDBUF on iWARP: at most RDMACM_RS_SBUF_SPAN (1 MiB) of it is used
// as the ring, SO_SNDBUF still reports what was set, and data wrapping round that smaller ring
// many times arrives intact.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as rs from '../../../dist/rsocket/index.js';
import { withRsPair, sendAll, recvAll, fixed } from '../../lib/rs-pair.js';

const { RS_EAGAIN, SOL_SOCKET, SO_RCVBUF, SO_SNDBUF } = rs;
const T = { timeout: 60_000 };
const MiB = 1024 * 1024;

/** A client with a 4 MiB SO_SNDBUF (an 8 MiB send buffer) and a server with a `rcv`-byte SO_RCVBUF. */
const withPair = (rcv, fn) => withRsPair({ listener: [[SOL_SOCKET, SO_RCVBUF, rcv]], client: [[SOL_SOCKET, SO_SNDBUF, 4 * MiB]] }, fn);

test('a 4 MiB SO_SNDBUF reports 8 MiB, but a peer that does not read lets rsend take only about 1 MiB', T, () =>
  withPair(8192, async ({ c, s }) => {
    assert.equal(c.getsockopt(SOL_SOCKET, SO_SNDBUF), 8 * MiB);
    const data = randomBytes(8 * MiB);
    let taken = 0;
    while (taken < data.length) {
      const n = c.send(data, taken, data.length - taken);
      if (n === RS_EAGAIN) break;
      taken += n;
    }
    // The 16 KiB window leaves the ring; the rest waits in the 1 MiB ring.
    assert.ok(taken >= MiB - 4096 && taken <= MiB + 64 * 1024, `${taken} bytes taken`);
    const got = recvAll(s, data.length, fixed(300_000));
    await sendAll(c, data.subarray(taken), fixed(700_000));
    assert.ok((await got).equals(data), 'every byte arrives, in order');
  }));

test('24 MiB in odd-sized sends through the 1 MiB ring (many wraps, with large receive halves)', T, () =>
  withPair(4 * MiB, async ({ c, s }) => {
    const data = randomBytes(24 * MiB);
    const [got] = await Promise.all([recvAll(s, data.length, fixed(777_777)), sendAll(c, data, fixed(333_333))]);
    assert.ok(got.equals(data), 'client -> server intact');
  }));
