// What the rstream and riostream end-to-end tests share: the table's header and row shapes, and
// a server/client pair on a free loopback port.
import assert from 'node:assert/strict';
import { startCli, runCli, waitListening, describeRun } from './tools.js';
import { freePort } from './ports.js';
import { sizeStr, cntStr } from '../../dist/cli/common.js';

export const HEADER = 'name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer';

/** The rows of the default series with RSTREAM_COUNT_DIVISOR=1000: [name, size, xfers, iters]. */
export const DEFAULT_SERIES = [
  ['64_lat', 64, 1, 100],
  ['4k_lat', 4096, 1, 10],
  ['64k_lat', 65536, 1, 1],
  ['1m_lat', 1 << 20, 1, 1],
  ['64_bw', 64, 100, 1],
  ['4k_bw', 4096, 10, 1],
  ['64k_bw', 65536, 1, 1],
  ['1m_bw', 1 << 20, 1, 1],
];

/** The exact first 42 columns of a row, then the shape of the three figures. */
export function rowRe(name, size, xfers, iters) {
  const head = name.padEnd(10) + sizeStr(size).padEnd(8) + cntStr(xfers).padEnd(8) + cntStr(iters).padEnd(8) + sizeStr(iters * xfers * size * 2).padEnd(8);
  const esc = head.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // %8.2fs%10.2f%11.2f: 4, 6 and 7 characters before the last integer digit
  return new RegExp(`^${esc}[ \\d]{4}\\d\\.\\d\\ds[ \\d]{6}\\d\\.\\d\\d[ \\d]{7}\\d\\.\\d\\d$`);
}

/** The rows a run must print: [name, size, xfers, iters]. */
export function assertTable(stdout, rows, who) {
  const lines = stdout.replace(/\n$/, '').split('\n');
  assert.equal(lines[0], HEADER, `${who}: header`);
  assert.equal(lines.length, rows.length + 1, `${who}: ${rows.length} rows expected\n${stdout}`);
  rows.forEach((r, i) => assert.match(lines[i + 1], rowRe(...r), `${who}: row ${i + 1}`));
}

/** Both ends exited 0 with nothing on stderr. */
export function assertOk(r) {
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
  assert.equal(r.cli.stderr, '', r.both);
  assert.equal(r.srv.stderr, '', r.both);
}

/**
 * Run a server and a client of `tool` with the same test options; both results. `env` is both
 * processes' environment, unless `srvEnv` / `cliEnv` give one of them its own.
 */
export async function pair(tool, args, { serverArgs = [], clientArgs = [], host = '127.0.0.1', env, srvEnv = env, cliEnv = env, timeoutMs = 50_000 } = {}) {
  const port = await freePort();
  const srv = startCli(tool, ['-p', String(port), ...args, ...serverArgs], { timeoutMs, env: srvEnv });
  try {
    await waitListening(port, { exited: srv.done });
    const cli = await runCli(tool, ['-s', host, '-p', String(port), ...args, ...clientArgs], { timeoutMs, env: cliEnv });
    const s = await srv.done;
    return { cli, srv: s, both: `${describeRun('client', cli)}\n${describeRun('server', s)}` };
  } finally {
    srv.kill('SIGKILL');
  }
}
