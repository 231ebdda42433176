// rdma_server / rdma_client end to end: the synchronous rdma_create_ep / rdma_get_request flow,
// one 16-byte inline send each way; lines and exit codes of rdma-core's examples.
import test from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, startCli, runCli, waitListening, describeRun } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';

const SERVER = join(REPO_ROOT, 'dist', 'cli', 'rdma_server.js');
const CLIENT = join(REPO_ROOT, 'dist', 'cli', 'rdma_client.js');
const opts = { skip: existsSync(SERVER) && existsSync(CLIENT) ? false : 'rdma_server/rdma_client are not built: run npm run build' };

async function pair(serverArgs, clientArgs, port) {
  const srv = startCli(SERVER, [...serverArgs, '-p', String(port)]);
  try {
    await waitListening(port, { exited: srv.done });
    const cli = await runCli(CLIENT, [...clientArgs, '-p', String(port)]);
    const s = await srv.done;
    return { cli, srv: s, both: `${describeRun('client', cli)}\n${describeRun('server', s)}` };
  } finally {
    srv.kill('SIGKILL');
  }
}

test('default addresses (server 0.0.0.0, client 127.0.0.1): start / end 0 on both sides', opts, async () => {
  const r = await pair([], [], await freePort());
  assert.equal(r.srv.stdout, 'rdma_server: start\nrdma_server: end 0\n', r.both);
  assert.equal(r.cli.stdout, 'rdma_client: start\nrdma_client: end 0\n', r.both);
  assert.equal(r.srv.stderr + r.cli.stderr, '', r.both);
  assert.equal(r.srv.code, 0);
  assert.equal(r.cli.code, 0);
});

test('IPv6: -s ::1 on both sides', opts, async () => {
  const r = await pair(['-s', '::1'], ['-s', '::1'], await freePort());
  assert.equal(r.srv.code, 0, r.both);
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.cli.stdout, 'rdma_client: start\nrdma_client: end 0\n', r.both);
});

test('no server: rdma_connect: Connection refused, end -1, exit 255', opts, async () => {
  const r = await runCli(CLIENT, ['-p', String(await freePort())]);
  assert.equal(r.stderr, 'rdma_connect: Connection refused\n', describeRun('client', r));
  assert.equal(r.stdout, 'rdma_client: start\nrdma_client: end -1\n');
  assert.equal(r.code, 255);
});

test('errors: bad service (-8), non-local server address (rdma_create_ep), usage', opts, async () => {
  let r = await runCli(CLIENT, ['-p', 'abc']);
  assert.equal(r.stdout, 'rdma_client: start\nrdma_getaddrinfo: Servname not supported for ai_socktype\nrdma_client: end -8\n');
  assert.equal(r.code, 248);
  r = await runCli(SERVER, ['-s', '203.0.113.77']);
  assert.equal(r.stderr, 'rdma_create_ep: Cannot assign requested address\n', describeRun('server', r));
  assert.equal(r.stdout, 'rdma_server: start\nrdma_server: end -1\n');
  assert.equal(r.code, 255);
  for (const [tool, name] of [[CLIENT, 'rdma_client'], [SERVER, 'rdma_server']]) {
    r = await runCli(tool, ['-x']);
    assert.equal(r.stderr, `${name}: invalid option -- 'x'\n`);
    assert.equal(r.stdout, `usage: ${name}\n\t[-s server_address]\n\t[-p port_number]\n`);
    assert.equal(r.code, 1);
  }
});
