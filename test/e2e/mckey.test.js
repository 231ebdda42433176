// mckey end to end on the soft RoCE device: receivers and a sender as separate processes on one
// host, in a network namespace of this test (only its loopback interface, so the group's traffic
// stays inside it); output lines and exit codes as rdma-core's mckey.c prints them on rxe. For -l
// (multicast loopback blocked), also two namespaces joined by a veth pair: two hosts on one link.
import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, startCli, runCli, describeRun, makeNetns, makeVethPair } from '../lib/tools.js';
import { sleep } from '../lib/wait.js';

const MCKEY = join(REPO_ROOT, 'dist', 'cli', 'mckey.js');
const ns = existsSync(MCKEY) ? makeNetns('mckey') : { skip: `${MCKEY} is missing: run npm run build`, remove() {} };
const veth = existsSync(MCKEY) ? makeVethPair('mckey') : { skip: ns.skip, remove() {} };
after(() => {
  ns.remove();
  veth.remove();
});
const opts = { skip: ns.skip };

const GROUP = '239.1.1.1';
const JOINED = `mckey: joined dgid: ::ffff:${GROUP} mlid 0x0 sl 0`;
const lines = (...l) => l.map((x) => `${x}\n`).join('');

const RECEIVER_OK = (joins = 1) =>
  lines('mckey: starting server', 'mckey: joining', ...Array(joins).fill(JOINED), 'receiving data transfers', 'data transfers complete', 'test complete', 'return status 0');
const SENDER_OK = (joins = 1) =>
  lines('mckey: starting client', 'mckey: joining', ...Array(joins).fill(JOINED), 'initiating data transfers', 'data transfers complete', 'test complete', 'return status 0');

function mckey(args, timeoutMs = 30_000) {
  return startCli(MCKEY, ['-m', GROUP, '-b', '127.0.0.1', ...args], { timeoutMs, netns: ns.name });
}

/** Resolve once `p` printed `n` joined lines (reject if it exits first or after `ms`). */
async function joined(p, n = 1, ms = 15_000) {
  let gone = false;
  p.done.then(() => (gone = true));
  const t0 = Date.now();
  while (p.stdout().split('\n').filter((l) => l.startsWith('mckey: joined dgid:')).length < n) {
    if (gone) throw new Error(`receiver ended before joining:\n${p.stdout()}${p.stderr()}`);
    if (Date.now() - t0 > ms) throw new Error(`receiver did not join in ${ms} ms:\n${p.stdout()}${p.stderr()}`);
    await sleep(25);
  }
}

/** Receivers first (until they have joined), then the sender; everyone's result. */
async function group({ receivers = 2, recv = [], send = [], joins = 1 }) {
  const rs = [];
  try {
    for (let i = 0; i < receivers; i++) rs.push(mckey(recv));
    for (const r of rs) await joined(r, joins);
    const s = await mckey(['-s', ...send]).done;
    const rr = [];
    for (const r of rs) rr.push(await r.done);
    const all = [describeRun('sender', s), ...rr.map((r, i) => describeRun(`receiver ${i}`, r))].join('\n');
    return { s, rr, all };
  } finally {
    for (const r of rs) r.kill('SIGKILL');
  }
}

test('one sender, two receiver processes on one group: every receiver gets all 10 datagrams; the 3 s settle', opts, async () => {
  const { s, rr, all } = await group({});
  assert.equal(s.stdout, SENDER_OK(), all);
  assert.equal(s.stderr, '', all);
  assert.equal(s.code, 0, all);
  // mckey sleeps 3 s after joining before it sends.
  assert.ok(s.ms >= 3000, all);
  for (const r of rr) {
    assert.equal(r.stdout, RECEIVER_OK(), all);
    assert.equal(r.stderr, '', all);
    assert.equal(r.code, 0, all);
  }
});

test('-c 2: two QPs per process join the group; -S 4096 (the largest that fits the MTU)', opts, async () => {
  const args = ['-c', '2', '-C', '10', '-S', '4096'];
  const { s, rr, all } = await group({ recv: args, send: args, joins: 2 });
  assert.equal(s.stdout, SENDER_OK(2), all);
  assert.equal(s.code, 0, all);
  for (const r of rr) {
    assert.equal(r.stdout, RECEIVER_OK(2), all);
    assert.equal(r.code, 0, all);
  }
});

test('-o: the sender joins as a send-only full member; the receivers still get everything', opts, async () => {
  const { s, rr, all } = await group({ receivers: 2, send: ['-o'] });
  assert.equal(s.stdout, SENDER_OK(), all);
  assert.equal(s.code, 0, all);
  for (const r of rr) assert.equal(r.stdout, RECEIVER_OK(), all);
});

test('-S over the MTU: message_size 5000 is larger than active mtu 4096, the leave fails, status -1', opts, async () => {
  for (const role of [[], ['-s']]) {
    const r = await mckey([...role, '-S', '5000']).done;
    const who = role.length ? 'client' : 'server';
    assert.equal(r.stdout, lines(`mckey: starting ${who}`, 'mckey: joining', 'mckey: message_size 5000 is larger than active mtu 4096', 'test complete', 'return status -1'), describeRun(who, r));
    assert.equal(r.stderr, 'mckey: failure leaving: Cannot assign requested address\n', describeRun(who, r));
    assert.equal(r.code, 255);
  }
});

test('a receiver with no sender waits for its datagrams for ever, as mckey does', opts, async () => {
  const r = mckey(['-C', '3'], 30_000);
  try {
    await joined(r);
    await sleep(3000 + 3000);
    assert.equal(r.stdout(), lines('mckey: starting server', 'mckey: joining', JOINED, 'receiving data transfers'), r.stderr());
    assert.equal(r.child.exitCode, null, 'still running');
  } finally {
    r.kill('SIGKILL');
  }
  const d = await r.done;
  assert.equal(d.signal, 'SIGKILL');
  assert.equal(d.timedOut, false);
});

test('-m 0.0.0.0: RoCE joins no zero group (rdma_join_multicast fails with EINVAL, as rxe), the leave fails', opts, async () => {
  const r = await mckey(['-s', '-m', '0.0.0.0']).done;
  assert.equal(r.stdout, lines('mckey: starting client', 'mckey: joining', 'test complete', 'return status -1'), describeRun('-m 0.0.0.0', r));
  assert.equal(r.stderr, 'mckey: failure joining: Invalid argument\nmckey: failure leaving: Cannot assign requested address\n', describeRun('-m 0.0.0.0', r));
  assert.equal(r.code, 255);
});

test('-m ff0e::1: no IPv6 groups on RoCEv2 (ENOTSUPP, errno 524, as rxe)', opts, async () => {
  const r = await startCli(MCKEY, ['-m', 'ff0e::1', '-b', '::1'], { netns: ns.name }).done;
  assert.equal(r.stdout, lines('mckey: starting server', 'mckey: joining', 'test complete', 'return status -1'), describeRun('-m ff0e::1', r));
  assert.equal(r.stderr, 'mckey: failure joining: Unknown error 524\nmckey: failure leaving: Cannot assign requested address\n', describeRun('-m ff0e::1', r));
  assert.equal(r.code, 255);
});

test('-M (AF_IB groups, which RoCE ports refuse): -M 0 EINVAL, another MGID ENOTSUPP (524); -M never leaves', opts, async () => {
  let r = await runCli(MCKEY, ['-M', '0', '-b', '127.0.0.1'], { netns: ns.name });
  assert.equal(r.stdout, lines('mckey: starting server', 'mckey: joining', 'test complete', 'return status -1'), describeRun('-M 0', r));
  assert.equal(r.stderr, 'mckey: failure joining: Invalid argument\nmckey: resolve addr failure: Invalid argument\n', describeRun('-M 0', r));
  assert.equal(r.code, 255);
  r = await runCli(MCKEY, ['-M', 'ff0e::ffff:239.1.1.1', '-b', '127.0.0.1', '-s'], { netns: ns.name });
  assert.equal(r.stdout, lines('mckey: starting client', 'mckey: joining', 'test complete', 'return status -1'), describeRun('-M ff0e::', r));
  assert.equal(r.stderr, 'mckey: failure joining: Unknown error 524\nmckey: resolve addr failure: Unknown error 524\n', describeRun('-M ff0e::', r));
  assert.equal(r.code, 255);
});

test('-l on the loopback interface: the sender\'s datagrams reach no receiver of this host; the same receivers get an ordinary sender\'s', opts, async () => {
  const rs = [mckey([]), mckey([])];
  try {
    for (const r of rs) await joined(r);
    const s = await mckey(['-s', '-l']).done;
    assert.equal(s.stdout, SENDER_OK(), describeRun('mckey -s -l', s));
    assert.equal(s.stderr, '', describeRun('mckey -s -l', s));
    assert.equal(s.code, 0);
    await sleep(1000);
    for (const r of rs) {
      assert.equal(r.stdout(), lines('mckey: starting server', 'mckey: joining', JOINED, 'receiving data transfers'), `nothing received:\n${r.stderr()}`);
      assert.equal(r.child.exitCode, null, 'still waiting');
    }
    // The receivers were listening all along: an ordinary sender completes them.
    const s2 = await mckey(['-s']).done;
    assert.equal(s2.code, 0, describeRun('mckey -s', s2));
    for (const r of rs) {
      const d = await r.done;
      assert.equal(d.stdout, RECEIVER_OK(), describeRun('receiver', d));
      assert.equal(d.code, 0);
    }
  } finally {
    for (const r of rs) r.kill('SIGKILL');
  }
});

test('-l on a receiver: only its own sends are kept from the host; it receives the group as ever', opts, async () => {
  const { s, rr, all } = await group({ receivers: 1, recv: ['-l'] });
  assert.equal(s.stdout, SENDER_OK(), all);
  assert.equal(s.code, 0, all);
  assert.equal(rr[0].stdout, RECEIVER_OK(), all);
  assert.equal(rr[0].stderr, '', all);
  assert.equal(rr[0].code, 0, all);
});

test('-l between two hosts (network namespaces on a veth pair): the other host receives everything, the sender\'s own host nothing', { skip: veth.skip || ns.skip }, async () => {
  const at = (netns, bind, args) => startCli(MCKEY, ['-m', GROUP, '-b', bind, ...args], { timeoutMs: 30_000, netns });
  const far = at(veth.b, veth.ipB, []);
  const near = at(veth.a, veth.ipA, []);
  try {
    await joined(far);
    await joined(near);
    const s = await at(veth.a, veth.ipA, ['-s', '-l']).done;
    assert.equal(s.stdout, SENDER_OK(), describeRun('mckey -s -l', s));
    assert.equal(s.code, 0, describeRun('mckey -s -l', s));
    const f = await far.done;
    assert.equal(f.stdout, RECEIVER_OK(), describeRun('receiver on the other host', f));
    assert.equal(f.code, 0, describeRun('receiver on the other host', f));
    await sleep(1000);
    assert.equal(near.stdout(), lines('mckey: starting server', 'mckey: joining', JOINED, 'receiving data transfers'), `the sender's host receives nothing:\n${near.stderr()}`);
    assert.equal(near.child.exitCode, null, 'still waiting');
  } finally {
    far.kill('SIGKILL');
    near.kill('SIGKILL');
  }
});

test('-S 0: join and leave only', opts, async () => {
  const { s, rr, all } = await group({ receivers: 1, recv: ['-S', '0'], send: ['-S', '0'] });
  assert.equal(s.stdout, lines('mckey: starting client', 'mckey: joining', JOINED, 'test complete', 'return status 0'), all);
  assert.equal(rr[0].stdout, lines('mckey: starting server', 'mckey: joining', JOINED, 'test complete', 'return status 0'), all);
  assert.equal(s.code, 0, all);
  assert.equal(rr[0].code, 0, all);
});

test('on an iWARP device: no UD QP (EOPNOTSUPP, as siw), with -l or without', opts, async () => {
  for (const extra of [[], ['-l']]) {
    const r = await startCli(MCKEY, ['-m', GROUP, '-b', '127.0.0.1', ...extra], { netns: ns.name, env: { RDMACM_DEVICE: 'siw_lo' } }).done;
    assert.equal(r.stdout, lines('mckey: starting server', 'mckey: joining', 'test complete', 'return status -1'), describeRun(`siw ${extra}`, r));
    assert.equal(r.stderr, 'mckey: unable to create QP: Operation not supported\nmckey: failure leaving: Cannot assign requested address\n', describeRun(`siw ${extra}`, r));
    assert.equal(r.code, 255);
  }
});
