// A process whose only pending work is a connect over the RoCE device (its REQ unanswered, no QP
// on the id) stays alive until the CM gives up, as a C program blocked in rdma_get_cm_event
// would: the REQ's resends keep the event loop alive. (The device's UDP socket does not, so that
// an idle process can end.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { once } from 'node:events';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const PORT = 20000 + Math.floor(Math.random() * 30000);
const PEER = '127.0.0.2';
const INDEX = fileURLToPath(new URL('../../../../../dist/index.js', import.meta.url));

const CHILD = `
const lib = await import(process.argv[1]);
const { createId, PortSpace, roce } = lib;
roce.configureRcCm({ cmTimeoutMs: 300, cmRetries: 2 });
const id = createId(null, null, PortSpace.TCP, { device: 'rxe_lo' });
await id.resolveAddr({ address: '127.0.0.1', port: 0 }, { address: '${PEER}', port: 7471 }, 2000);
await id.resolveRoute(2000);
// no QP: nothing but the CM keeps the process alive
try {
  await id.connect();
  console.log('connected');
} catch (e) {
  console.log('connect: ' + e.code);
}
await id.destroy();
`;

test('a pending connect (REQ unanswered) keeps the process alive until UNREACHABLE', async () => {
  const sink = dgram.createSocket('udp4');
  sink.bind(PORT, PEER);
  await once(sink, 'listening');
  let reqs = 0;
  sink.on('message', () => reqs++);
  try {
    const p = spawn(process.execPath, ['--input-type=module', '-e', CHILD, INDEX], {
      env: { ...process.env, RDMACM_ROCE_PORT: String(PORT) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    const t = setTimeout(() => p.kill('SIGKILL'), 20_000);
    const [code] = await once(p, 'exit');
    clearTimeout(t);
    assert.equal(code, 0, `exit ${code}: ${out} ${err}`);
    assert.match(out, /^connect: ETIMEDOUT\n$/, err);
    assert.equal(reqs, 3, 'the REQ and its two resends reached the peer');
  } finally {
    sink.close();
  }
});
