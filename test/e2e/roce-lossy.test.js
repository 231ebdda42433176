// RC over RoCE on a lossy link: two network namespaces of this test joined by a veth pair, the
// server in one and the client in the other, both pinned to the soft RoCE device of the veth
// (rxe_rc0). The link drops, duplicates and reorders datagrams — with `tc qdisc netem` when the
// kernel has it, else with the device's own impairment (RDMACM_ROCE_IMPAIR, the same effects on
// every datagram it sends); the CM's DREQs pass untouched either way. rping -V and rsockets
// (rstream, riostream, and an echo whose bytes are compared) must run to completion with every
// byte intact; a peer that goes silent (its link down) must end the RC traffic in
// RETRY_EXC_ERR, on the side with a request outstanding, within retry_cnt + 1 local ACK
// timeouts. Short local ACK timeouts (RDMACM_ROCE_ACK_TIMEOUT) keep each loss cheap.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT, startCli, describeRun, rpingLines, netemSparingDreq } from '../lib/tools.js';
import { sleep } from '../lib/wait.js';

const cli = (name) => join(REPO_ROOT, 'dist', 'cli', `${name}.js`);
const SERVER_IP = '10.77.0.1';
const CLIENT_IP = '10.77.0.2';
const ip = (...a) => spawnSync('ip', a, { encoding: 'utf8' });
const tc = (ns, ...a) => spawnSync('ip', ['netns', 'exec', ns, 'tc', ...a], { encoding: 'utf8' });

/** Two namespaces joined by veth (rc0 in both): `{ a, b, skip, remove }`. */
function makeLink() {
  const a = `rdmacm-rca-${process.pid}`;
  const b = `rdmacm-rcb-${process.pid}`;
  const remove = () => {
    ip('netns', 'del', a);
    ip('netns', 'del', b);
  };
  const steps = [
    ['netns', 'add', a],
    ['netns', 'add', b],
    ['link', 'add', `rcva${process.pid % 100000}`, 'type', 'veth', 'peer', 'name', `rcvb${process.pid % 100000}`],
    ['link', 'set', `rcva${process.pid % 100000}`, 'netns', a],
    ['link', 'set', `rcvb${process.pid % 100000}`, 'netns', b],
    ['-n', a, 'link', 'set', `rcva${process.pid % 100000}`, 'name', 'rc0'],
    ['-n', b, 'link', 'set', `rcvb${process.pid % 100000}`, 'name', 'rc0'],
    ['-n', a, 'addr', 'add', `${SERVER_IP}/24`, 'dev', 'rc0'],
    ['-n', b, 'addr', 'add', `${CLIENT_IP}/24`, 'dev', 'rc0'],
    ['-n', a, 'link', 'set', 'rc0', 'up'],
    ['-n', b, 'link', 'set', 'rc0', 'up'],
    ['-n', a, 'link', 'set', 'lo', 'up'],
    ['-n', b, 'link', 'set', 'lo', 'up'],
  ];
  for (const s of steps) {
    const r = ip(...s);
    if (r.error || r.status !== 0) {
      remove();
      return { a, b, skip: `cannot set up the link (ip ${s.join(' ')}): ${(r.error?.message ?? r.stderr).trim()}`, remove() {} };
    }
  }
  return { a, b, skip: false, remove };
}

const link = makeLink();
test.after(() => link.remove());

/**
 * Impair the link both ways: netem when the kernel has it (returns {}), else the device's
 * impairment through the environment of the processes (returns that environment). Either way the
 * CM's DREQs pass untouched: rping's client sends its DREQ once and exits, and a lost one would
 * leave the server waiting for ever (see netemSparingDreq).
 */
function impair({ loss, dup = 0, reorder = 0 }, seed) {
  const args = ['loss', `${loss * 100}%`];
  if (dup) args.push('duplicate', `${dup * 100}%`);
  if (reorder) args.push('delay', '1ms', 'reorder', `${100 - reorder * 100}%`);
  let netem = true;
  for (const ns of [link.a, link.b]) {
    tc(ns, 'qdisc', 'del', 'dev', 'rc0', 'root');
    for (const step of netemSparingDreq('rc0', args)) if (netem && tc(ns, ...step).status !== 0) netem = false;
  }
  if (netem) return { how: 'netem', env: {} };
  for (const ns of [link.a, link.b]) tc(ns, 'qdisc', 'del', 'dev', 'rc0', 'root');
  return { how: 'device impairment', env: { RDMACM_ROCE_IMPAIR: `loss=${loss},dup=${dup},reorder=${reorder},delay=1,seed=${seed},spare=dreq` } };
}

// Local ACK timeout 15: 134 ms, so a requester gives up after 8 × 134 ms ≈ 1.1 s without an
// acknowledgement. With 12 (17 ms, 134 ms in all) a peer that was merely off its CPU that long on
// a loaded 2-CPU machine (the test suite runs files in parallel) ended runs in RETRY_EXC_ERR.
const BASE_ENV = { RDMACM_DEVICE: 'rxe_rc0', RDMACM_ROCE_ACK_TIMEOUT: '15' };

/** Run `tool` as server in namespace a and client in b; both results. */
async function pair(tool, serverArgs, clientArgs, env, timeoutMs = 60_000) {
  const srv = startCli(cli(tool), serverArgs, { env: { ...BASE_ENV, ...env }, netns: link.a, timeoutMs });
  try {
    await sleep(700); // the server listens (there is no TCP port to watch in its namespace)
    const c = await startCli(cli(tool), clientArgs, { env: { ...BASE_ENV, ...env }, netns: link.b, timeoutMs }).done;
    const s = await srv.done;
    return { cli: c, srv: s, both: `${describeRun('client', c)}\n${describeRun('server', s)}` };
  } finally {
    srv.kill('SIGKILL');
  }
}

/** An rsocket echo of `bytes` random bytes from b to a; the hash of what came back. */
const ECHO = `
const rs = await import(${JSON.stringify(join(REPO_ROOT, 'dist', 'rsocket', 'index.js'))});
const { createHash } = await import('node:crypto');
const [role, addr, port, n] = process.argv.slice(1);
if (role === 'server') {
  const srv = rs.createServer({}, (s) => { s.pipe(s); s.on('close', () => srv.close()); });
  srv.listen(Number(port), addr);
} else {
  const c = rs.connect(Number(port), addr);
  await new Promise((r, j) => { c.once('connect', r); c.once('error', j); });
  const data = Buffer.alloc(Number(n));
  for (let i = 0; i < data.length; i++) data[i] = (i * 131 + (i >> 8)) & 0xff;
  const h = createHash('sha256');
  let got = 0;
  c.on('data', (d) => { h.update(d); got += d.length; });
  for (let at = 0, k = 1; at < data.length; k = (k * 7 + 3) % 60000 + 1) { c.write(data.subarray(at, at + k)); at += k; }
  c.end();
  await new Promise((r) => c.once('end', r));
  process.stdout.write(JSON.stringify({ got, sent: createHash('sha256').update(data).digest('hex'), back: h.digest('hex') }) + '\\n');
  c.destroy();
}
`;

async function echo(env, bytes, port) {
  const run = (ns, args) => startCli('--input-type=module', ['-e', ECHO, ...args], { env: { ...BASE_ENV, ...env }, netns: ns, timeoutMs: 60_000 });
  const srv = run(link.a, ['server', SERVER_IP, String(port), '0']);
  try {
    await sleep(700);
    const c = await run(link.b, ['client', SERVER_IP, String(port), String(bytes)]).done;
    return c;
  } finally {
    srv.kill('SIGKILL');
    await srv.done;
  }
}

for (const [name, cond, seed] of [
  ['1% loss', { loss: 0.01 }, 11],
  ['5% loss, 2% duplication, 5% reordering', { loss: 0.05, dup: 0.02, reorder: 0.05 }, 12],
]) {
  test(`lossy link (${name}): rping -V, an rsocket echo with every byte compared, rstream and riostream run to completion`, { skip: link.skip }, async (t) => {
    const { how, env } = impair(cond, seed);
    t.diagnostic(`impairment by ${how}`);
    const rp = ['-a', SERVER_IP, '-p', '7001', '-C', '60', '-S', '3000', '-V'];
    const r = await pair('rping', ['-s', ...rp], ['-c', ...rp, '-v'], env);
    assert.equal(r.cli.code, 0, r.both);
    assert.equal(r.srv.code, 0, r.both);
    assert.equal(r.cli.stdout, rpingLines({ count: 60, size: 3000, role: 'client' }), r.both);
    assert.ok(!/data mismatch/.test(r.cli.stderr + r.srv.stderr), r.both);

    const e = await echo(env, 1_000_000, 7002);
    assert.equal(e.code, 0, describeRun('echo client', e));
    const res = JSON.parse(e.stdout);
    assert.equal(res.got, 1_000_000);
    assert.equal(res.back, res.sent, 'the bytes came back intact');

    for (const tool of ['rstream', 'riostream']) {
      const custom = ['-S', '65536', '-C', '40', '-T', 'b'];
      const s = await pair(tool, ['-b', SERVER_IP, '-p', '7003', ...custom], ['-s', SERVER_IP, '-p', '7003', ...custom], env);
      assert.equal(s.cli.code, 0, s.both);
      assert.equal(s.srv.code, 0, s.both);
      assert.match(s.cli.stdout, /\ncustom\s+64k\s+40\s+1\s+/, s.both);
    }
  });
}

test('a peer that goes silent (its link down): the side with a request outstanding ends in RETRY_EXC_ERR within (retry_cnt + 1) local ACK timeouts', { skip: link.skip }, async () => {
  impair({ loss: 0 }, 1);
  for (const ns of [link.a, link.b]) tc(ns, 'qdisc', 'del', 'dev', 'rc0', 'root');
  // timeout 14: 67 ms; rping asks for 7 retries: 8 × 67 ms ≈ 0.54 s.
  const env = { ...BASE_ENV, RDMACM_ROCE_ACK_TIMEOUT: '14' };
  const args = ['-a', SERVER_IP, '-p', '7004', '-v'];
  const srv = startCli(cli('rping'), ['-s', ...args], { env, netns: link.a, timeoutMs: 30_000 });
  const c = startCli(cli('rping'), ['-c', ...args], { env, netns: link.b, timeoutMs: 30_000 });
  try {
    const t0 = Date.now();
    while ((c.stdout().match(/\n/g) ?? []).length < 20 && Date.now() - t0 < 15_000) await sleep(10);
    assert.ok((c.stdout().match(/\n/g) ?? []).length >= 20, 'pinging');
    ip('-n', link.b, 'link', 'set', 'rc0', 'down');
    const down = Date.now();
    // Whichever side has a request outstanding (the server's RDMA READ or SEND, or the client's
    // next SEND, posted into the dead link) must give up; a side that only waits for the other's
    // next message has nothing to time out (RC has no keepalive) and is ended by the test.
    let timer;
    const r = await Promise.race([
      srv.done.then((x) => ({ who: 'server', x })),
      c.done.then((x) => ({ who: 'client', x })),
      new Promise((res) => (timer = setTimeout(() => res(null), 10_000))),
    ]);
    clearTimeout(timer);
    assert.ok(r !== null, `neither side ended: server ${srv.stderr()}\nclient ${c.stderr()}`);
    const took = Date.now() - down;
    assert.equal(r.x.code, 255, describeRun(r.who, r.x));
    assert.match(r.x.stderr, /^cq completion failed status 12\n/, describeRun(r.who, r.x));
    assert.ok(took < 5000, `ended ${took} ms after the link went down`);
  } finally {
    ip('-n', link.b, 'link', 'set', 'rc0', 'up');
    srv.kill('SIGKILL');
    c.kill('SIGKILL');
    await srv.done;
    await c.done;
  }
});
