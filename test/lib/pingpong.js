// The libibverbs pingpong examples as two processes: a server, then the client once the server's
// side channel listens; the lines the C tools print; the GID index a RoCE device has for loopback.
import { join } from 'node:path';
import { REPO_ROOT, startCli, runCli, describeRun, waitListening } from './tools.js';
import { freePort } from './ports.js';

export const cli = (name) => join(REPO_ROOT, 'dist', 'cli', `${name}.js`);
/** A private RoCE UDP port for this test process: other tests on the host never see its datagrams. */
export const ROCE_PORT = String(40000 + Math.floor(Math.random() * 20000));
export const ENV = { RDMACM_ROCE_PORT: ROCE_PORT, RDMACM_PP_TIMEOUT_MS: '3000' };
/** What rdma-core's tools print after a short read of the side channel (a stale errno). */
export const STALE = 'No space left on device';

/** The index of a GID of `dev` holding `::ffff:127.0.0.1`, or of any non-zero one; -1 without. */
export function loopbackGidIndex(dev) {
  const ctx = dev.open();
  const n = ctx.queryPort(1).gidTblLen;
  let any = -1;
  for (let i = 0; i < n; i++) {
    const g = Buffer.from(ctx.queryGid(1, i));
    if (g.equals(Buffer.from('00000000000000000000ffff7f000001', 'hex'))) return i;
    if (any < 0 && g.subarray(8).some((x) => x !== 0)) any = i;
  }
  return any;
}

/** A server run, then the client once the side channel listens; both results. */
export async function pair(tool, args, { serverArgs = args, port, timeoutMs = 60_000 } = {}) {
  const p = port ?? (await freePort());
  const srv = startCli(cli(tool), ['-p', String(p), ...serverArgs], { env: ENV, timeoutMs });
  try {
    await waitListening(p, { exited: srv.done, timeoutMs: 30_000 }).catch(() => {});
    const c = await runCli(cli(tool), ['-p', String(p), ...args, '127.0.0.1'], { env: ENV, timeoutMs });
    const s = await srv.done;
    return { cli: c, srv: s, both: `${describeRun('client', c)}\n${describeRun('server', s)}` };
  } finally {
    srv.kill('SIGKILL');
  }
}

/** The C tools' lines for `iters` exchanges of `size` bytes over `n` QPs (figures left free). */
export function outputRe({ size, iters, n = 1, ud = false }) {
  const addr = (what, sep) => ` {2}${what} address:${what === 'local' ? ' {2}' : ' '}LID 0x[0-9a-f]{4}, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}${sep} GID ::ffff:127\\.0\\.0\\.1\\n`;
  return new RegExp(
    `^(${addr('local', ud ? ':' : ',')}){${n}}(${addr('remote', ',')}){${n}}` +
      `${size * iters * 2} bytes in \\d+\\.\\d\\d seconds = [\\d.]+ Mbit/sec\\n${iters} iters in \\d+\\.\\d\\d seconds = [\\d.]+ usec/iter\\n$`,
  );
}

