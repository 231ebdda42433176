// Decoding the soft devices' packet captures with Wireshark's tshark (docs/capture.md), for the
// capture tests: tool runs with RDMA_PCAP set, one file per process, each decoded with no
// malformed packet and no expert error. Without tshark the tests skip loudly (NO_TSHARK).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT, startCli, runCli, describeRun, waitRoceListening } from './tools.js';
import { sleep } from './wait.js';

/** A tool's script in dist/cli. */
export const cli = (name) => join(REPO_ROOT, 'dist', 'cli', `${name}.js`);
/** The soft RoCE device's UDP port in the capture tests' tool runs (and tshark's decode of it). */
export const ROCE_PORT = String(40000 + Math.floor(Math.random() * 20000));

const TSHARK = spawnSync('tshark', ['--version'], { encoding: 'utf8' });
/** Why the capture files cannot be decoded here (false: tshark is installed). */
export const NO_TSHARK = TSHARK.status === 0 ? false : 'tshark is not installed (apt-get install tshark): capture files are not decoded';
if (NO_TSHARK) {
  process.stderr.write(`\n${'#'.repeat(78)}\n# SKIPPED: ${NO_TSHARK}\n${'#'.repeat(78)}\n\n`);
}

/**
 * Run tshark on `file` (RoCE decoded on our private UDP port); stdout, failing on an error exit.
 * Wireshark's RPC-over-RDMA dissector takes any small Send payload (an rsocket's messages) for its
 * own and fails on it: it is off here, as docs/capture.md tells users.
 */
export function tshark(file, args) {
  const r = spawnSync('tshark', ['-r', file, '--disable-protocol', 'rpcordma', '-d', `udp.port==${ROCE_PORT},infiniband`, ...args], { encoding: 'utf8', maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, `tshark ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** Per frame: the fields asked for, tab-separated. */
export function fields(file, names) {
  return tshark(file, ['-T', 'fields', ...names.flatMap((n) => ['-e', n])])
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.split('\t'));
}

/** The checks every capture file passes: it decodes, nothing malformed, no expert error. */
export function decodesCleanly(file) {
  const v = tshark(file, ['-V']);
  const bad = v.split(/\n(?=Frame \d+:)/).filter((x) => /Malformed Packet/.test(x));
  assert.equal(bad.length, 0, `${file}: malformed packets:\n${bad.slice(0, 2).join("\n").slice(0, 6000)}`);
  const expert = tshark(file, ['-q', '-z', 'expert,error']);
  assert.doesNotMatch(expert, /Errors \(\d+\)/, `${file}: expert errors\n${expert}`);
  return v;
}

/**
 * Run a server and a client with RDMA_PCAP into a fresh folder; both must exit 0, each leaving one
 * file. `server`/`client`: `[tool, args]` (one tool: `captured(tool, serverArgs, clientArgs)`).
 * `roce` with `port`: wait until the server's CM listens on the soft RoCE device.
 */
export async function captured(tool, serverArgs, clientArgs, { env = {}, roce = false, port, clientTool = tool } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-pcap-'));
  const e = { RDMACM_ROCE_PORT: ROCE_PORT, RDMA_PCAP: join(dir, `${tool}-%p.pcapng`), ...env };
  const srv = startCli(cli(tool), serverArgs, { env: e, timeoutMs: 60_000 });
  try {
    if (roce && port !== undefined) await waitRoceListening(ROCE_PORT, port, srv.done);
    else await sleep(1500);
    const c = await runCli(cli(clientTool), clientArgs, { env: e, timeoutMs: 60_000 });
    const s = await srv.done;
    const both = `${describeRun('client', c)}\n${describeRun('server', s)}`;
    assert.equal(c.code, 0, both);
    assert.equal(s.code, 0, both);
    const files = readdirSync(dir).map((f) => join(dir, f));
    assert.equal(files.length, 2, `one file per process: ${files.join(' ')}`);
    return { files, dir, both };
  } finally {
    srv.kill('SIGKILL');
  }
}
