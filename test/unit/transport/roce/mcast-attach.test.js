// ibv_attach_mcast when the group's socket cannot be opened: a process with RLIMIT_NOFILE 256 that
// holds all but some 40 descriptors (mcast-limit-peer.js) attaches groups until one fails. The failing attach throws an RdmaError
// with the socket's errno (EMFILE) and leaves nothing behind; the groups attached before it
// still receive; once a descriptor is free the same group attaches and receives; detaching
// everything gives every descriptor back. rdma_join_multicast of the failing group reports
// MULTICAST_ERROR with -EMFILE.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { PORT } from '../../../lib/roce.js';

const PEER = fileURLToPath(new URL('./mcast-limit-peer.js', import.meta.url));

/**
 * Run the peer under `ulimit -n <nofile>`, holding `fill` descriptors before its attaches; resolves
 * with its JSON line and exit code.
 */
async function runPeer(nofile, fill) {
  const c = spawn('sh', ['-c', `ulimit -n ${nofile}; exec "$0" "$1"`, process.execPath, PEER], {
    env: { ...process.env, RDMACM_ROCE_PORT: String(PORT), FILL_FDS: String(fill) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  c.stdout.setEncoding('utf8');
  c.stdout.on('data', (d) => (out += d));
  const [code] = await once(c, 'exit');
  return { code, result: JSON.parse(out.trim().split('\n').pop() || '{}') };
}

test('an attach whose group socket cannot be opened fails with EMFILE and keeps nothing; the other groups still receive', { timeout: 90_000 }, async () => {
  const { code, result: r } = await runPeer(256, 216);
  assert.equal(code, 0, JSON.stringify(r));
  assert.ok(r.attached > 0 && r.attached < 64, `some groups attached before the descriptors ran out (${r.attached})`);
  assert.deepEqual(
    { code: r.failed?.code, errno: r.failed?.errno, rdmaError: r.failed?.rdmaError },
    { code: 'EMFILE', errno: 24, rdmaError: true },
    'the failing attach throws an RdmaError with the errno of the socket',
  );
  assert.equal(r.mcastGroups, r.attached, 'the device holds only the groups attached');
  assert.equal(r.agentGroups, r.attached, 'the port agent holds only their sockets');
  assert.equal(r.failedKept, false, 'the failed group is not kept');
  assert.equal(r.failedHeld, false, 'no empty group is left');
  assert.equal(r.again, 'EMFILE', 'attaching the same group again fails again');
  assert.deepEqual(
    { event: r.cmEvent, status: r.cmStatus, context: r.cmContext, kept: r.cmKept },
    { event: 'RDMA_CM_EVENT_MULTICAST_ERROR', status: -24, context: 'cm-join', kept: false },
    'rdma_join_multicast: MULTICAST_ERROR with -EMFILE',
  );
  assert.equal(r.firstReceives, true, 'the first group receives');
  assert.equal(r.lastReceives, true, 'the last group attached receives');
  assert.equal(r.afterFree, 'attached', 'with a descriptor free, the group attaches');
  assert.equal(r.afterFreeReceives, true, 'and receives');
  assert.equal(r.fdsLeaked, 0, 'every descriptor is given back');
  assert.equal(r.agentGroupsAfter, 0);
  assert.equal(r.mcastGroupsAfter, 0);
});
