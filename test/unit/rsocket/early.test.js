// rsend copies ahead into the send buffer while the peer has granted no target space (RsConn's
// early staging): the bytes are posted, in order, when the grant arrives. Checked here: more than
// the peer's receive window is accepted while the peer does not read, nothing is lost, reordered
// or duplicated across many grants, and a shutdown/close sends the staged bytes before the
// SHUTDOWN/DISCONNECT.
import test from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as rs from '../../../dist/rsocket/index.js';
import { withRsPair, sendAll as sendAllIn, recvAll as recvAllIn, upTo } from '../../lib/rs-pair.js';

const { RS_EAGAIN, SOL_SOCKET, SO_RCVBUF, SO_SNDBUF, SHUT_WR } = rs;
const T = { timeout: 30_000 };

/** A connected pair: client with a 64 KiB send buffer, server with a 16 KiB receive buffer (8 KiB halves). */
const PAIR = { listener: [[SOL_SOCKET, SO_RCVBUF, 8192]], client: [[SOL_SOCKET, SO_SNDBUF, 32768]] };
const withPair = (fn) => withRsPair(PAIR, fn);
const sendAll = (conn, buf) => sendAllIn(conn, buf, upTo(20000));
const recvAll = (conn, max) => recvAllIn(conn, max, upTo(30000));

test('with no target space left, rsend still takes bytes up to the send buffer; all arrive in order', T, () =>
  withPair(async ({ c, s }) => {
    const data = randomBytes(48 * 1024);
    // The server does not read: its window is 16 KiB (8 KiB granted at first), yet the client's 64 KiB send buffer takes more.
    let taken = 0;
    for (;;) {
      const n = c.send(data, taken, data.length - taken);
      if (n === RS_EAGAIN) break;
      taken += n;
      if (taken === data.length) break;
    }
    assert.ok(taken > 16 * 1024, `${taken} bytes taken with a 16 KiB window`);
    const got = recvAll(s, data.length);
    await sendAll(c, data.subarray(taken));
    assert.ok((await got).equals(data), 'the receiver gets every byte, in order');
  }));

test('many grants: 2 MiB in random-sized sends and receives through a 16 KiB window, both ways', T, () =>
  withPair(async ({ c, s }) => {
    const a = randomBytes(2 * 1024 * 1024);
    const b = randomBytes(512 * 1024);
    const [gotA, gotB] = await Promise.all([recvAll(s, a.length), recvAll(c, b.length), sendAll(c, a), sendAll(s, b)]);
    assert.ok(gotA.equals(a), 'client -> server intact');
    assert.ok(gotB.equals(b), 'server -> client intact');
  }));

test('shutdown(SHUT_WR) and close() send the early-staged bytes first, then the end of stream', T, () =>
  withPair(async ({ c, s }) => {
    const data = randomBytes(40 * 1024);
    let taken = 0;
    while (taken < data.length) {
      const n = c.send(data, taken, data.length - taken);
      if (n === RS_EAGAIN) break;
      taken += n;
    }
    assert.ok(taken > 16 * 1024, 'more than the window is staged');
    const got = recvAll(s, 1024 * 1024);
    const shut = c.shutdown(SHUT_WR);
    const all = await got;
    await shut;
    assert.ok(all.equals(data.subarray(0, taken)), 'every staged byte, then EOF');
  }));
