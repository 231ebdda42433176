// rpoll after the peer's DISCONNECT: data that arrived before it is still readable, so a poll for
// POLLIN reports POLLIN alone until that data is read, then POLLIN|POLLHUP (and rrecv 0) — as a
// TCP stream ends after its data. A poll for POLLOUT reports POLLHUP at once. (rsocket.c reports
// POLLHUP at once in both cases, and a caller such as rstream -T a then gives up on the data.)
import test from 'node:test';
import assert from 'node:assert/strict';
import * as rs from '../../../dist/rsocket/index.js';
import { withRsPair } from '../../lib/rs-pair.js';
import { until } from '../../lib/wait.js';

const { RS_EAGAIN, POLLIN, POLLOUT, POLLHUP, SHUT_RDWR } = rs;
const T = { timeout: 30_000 };

const withPair = (fn) => withRsPair({}, fn);

/** Wait until `c.poll(events, 0)` reports `bit`. */
const untilPolled = (c, events, bit) => until(async () => (await c.poll(events, 0)) & bit, 5000, `poll bit ${bit}`);

test('data then DISCONNECT, processed together: POLLIN without POLLHUP until the data is read', T, () =>
  withPair(async ({ c, s }) => {
    const msg = Buffer.from('the last words');
    assert.equal(s.send(msg), msg.length);
    await s.shutdown(SHUT_RDWR);
    await untilPolled(c, POLLOUT, POLLHUP); // the DISCONNECT has been processed
    assert.equal(await c.poll(POLLIN, 0), POLLIN, 'data first');
    assert.equal(await c.poll(POLLIN | POLLOUT, 0), POLLIN, 'data first, also when POLLOUT is asked too');
    const got = Buffer.alloc(64);
    assert.equal(c.recv(got), msg.length);
    assert.equal(got.subarray(0, msg.length).toString(), 'the last words');
    assert.equal(await c.poll(POLLIN, 0), POLLIN | POLLHUP, 'then the end');
    assert.equal(c.recv(got), 0, 'end of stream');
  }));

test('a poll waiting for POLLIN when the data and the DISCONNECT arrive: POLLIN, the data readable', T, () =>
  withPair(async ({ c, s }) => {
    const waiting = c.poll(POLLIN);
    s.send(Buffer.from('abc'));
    await s.shutdown(SHUT_RDWR);
    assert.equal(await waiting, POLLIN);
    const got = Buffer.alloc(8);
    let n;
    while ((n = c.recv(got)) === RS_EAGAIN) await c.poll(POLLIN);
    assert.equal(got.subarray(0, n).toString(), 'abc');
  }));
