// rping with a slow peer: one side's process is stopped (SIGSTOP) for 400 ms at a moment of the
// connection setup — before the MPA exchange, between Request and Reply, around the RTR, during
// the first pings — then continued. A stopped process reads nothing and runs no timer, as a peer
// on a saturated machine. Every run must still complete cleanly, with every ping validated.
import test from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { RPING, startCli, waitListening, describeRun, rpingText } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';
import { sleep } from '../lib/wait.js';

const opts = { skip: existsSync(RPING) ? false : `${RPING} is missing: run npm run build`, timeout: 120_000 };

/** One rping pair (-C 3 -V -v), `side` stopped for `pause` ms, `at` ms after the client started. */
async function run(side, at, pause = 400) {
  const port = String(await freePort());
  const srv = startCli(RPING, ['-s', '-a', '127.0.0.1', '-p', port, '-C', '3', '-V'], { timeoutMs: 30_000 });
  try {
    await waitListening(Number(port), { exited: srv.done });
    const cli = startCli(RPING, ['-c', '-a', '127.0.0.1', '-p', port, '-C', '3', '-V', '-v'], { timeoutMs: 30_000 });
    const victim = side === 'client' ? cli.child : srv.child;
    await sleep(at);
    victim.kill('SIGSTOP');
    await sleep(pause);
    victim.kill('SIGCONT');
    const [c, s] = await Promise.all([cli.done, srv.done]);
    return { c, s, both: `${side} stopped at ${at} ms\n${describeRun('client', c)}\n${describeRun('server', s)}` };
  } finally {
    srv.child.kill('SIGCONT');
    srv.kill('SIGKILL');
  }
}

for (const side of ['client', 'server']) {
  test(`rping with the ${side} stopped for 400 ms at moments of the setup: every run completes, every ping validated`, opts, async () => {
    for (const at of [0, 25, 50, 100, 200]) {
      const r = await run(side, at);
      assert.equal(r.c.code, 0, r.both);
      assert.equal(r.s.code, 0, r.both);
      assert.equal(r.c.stdout, [0, 1, 2].map((n) => `ping data: ${rpingText(n)}\n`).join(''), r.both);
      assert.equal(r.c.stderr, 'client DISCONNECT EVENT...\n', r.both);
      assert.equal(r.s.stderr, 'server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\n', r.both);
    }
  });
}
