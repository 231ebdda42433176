// Numeric and address arguments the C tools refuse are refused here with the C tool's message and
// exit status (never a Node exception or a nonsense result row); the odd ones the C tools accept
// are accepted the same way. The expected behaviour is derived from rdma-core's
// librdmacm/examples sources: each tool's atoi(3)/getaddrinfo(3) reading of its options, what it
// allocates from them and what it prints when that fails.
import test from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, startCli, runCli, waitListening, describeRun } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';

const tool = (name) => join(REPO_ROOT, 'dist', 'cli', `${name}.js`);
const RSTREAM = tool('rstream');
const RIOSTREAM = tool('riostream');
const UCMATOSE = tool('ucmatose');
const CMTIME = tool('cmtime');
const SERVER = tool('rdma_server');
const CLIENT = tool('rdma_client');
const opts = { skip: existsSync(RSTREAM) ? false : 'the tools are not built: run npm run build' };
const HEADER = 'name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer\n';

/** Run a server, then a client against it; both results. */
async function pair(path, serverArgs, clientArgs, { port, timeoutMs = 20_000 } = {}) {
  const p = port ?? (await freePort());
  const srv = startCli(path, [...serverArgs, '-p', String(p)], { timeoutMs });
  try {
    await waitListening(p, { exited: srv.done });
    const cli = await runCli(path, [...clientArgs, '-p', String(p)], { timeoutMs });
    const s = await srv.done;
    return { cli, srv: s, both: `${describeRun('client', cli)}\n${describeRun('server', s)}` };
  } finally {
    srv.kill('SIGKILL');
  }
}

/** `r` exited with `code`, printing exactly `stdout` and `stderr`. */
function exact(r, code, stdout, stderr, what) {
  const d = describeRun(what, r);
  assert.equal(r.timedOut, false, d);
  assert.equal(r.stdout, stdout, d);
  assert.equal(r.stderr, stderr, d);
  assert.equal(r.code, code, d);
}

// -- rstream / riostream ------------------------------------------------------------------------

test('rstream/riostream -S 3000000000 and -S -1: "malloc: Cannot allocate memory", exit 255, nothing else', opts, async () => {
  // atoi gives a negative int; malloc((size_t) negative) fails before anything is printed.
  for (const path of [RSTREAM, RIOSTREAM]) {
    for (const size of ['3000000000', '-1']) {
      const port = String(await freePort());
      exact(await runCli(path, ['-S', size, '-p', port]), 255, '', 'malloc: Cannot allocate memory\n', `server -S ${size}`);
      exact(await runCli(path, ['-s', '127.0.0.1', '-S', size, '-p', port]), 255, '', 'malloc: Cannot allocate memory\n', `client -S ${size}`);
    }
  }
});

test('rstream -S 0 is accepted (malloc(0) succeeds): a row of zero bytes on each side', opts, async () => {
  const r = await pair(RSTREAM, ['-S', '0', '-C', '10'], ['-s', '127.0.0.1', '-S', '0', '-C', '10']);
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
  assert.match(r.cli.stdout, /^name .*\ncustom    0       10      1       0       /, r.both);
});

test('rstream -B 3000000000: the rsocket buffers cannot be had — client "rpoll: Cannot allocate memory" exit 8 (blocking: rconnect, 255); a server refuses the connection', opts, async () => {
  // (uint32_t) 3e9 << 1 = 1.7 GB per buffer.
  const port = String(await freePort());
  exact(await runCli(RSTREAM, ['-s', '127.0.0.1', '-B', '3000000000', '-C', '10', '-p', port]), 8, HEADER, 'rpoll: Cannot allocate memory\n', 'client');
  exact(await runCli(RSTREAM, ['-s', '127.0.0.1', '-B', '-1', '-C', '10', '-T', 'b', '-p', port]), 255, HEADER, 'rconnect: Cannot allocate memory\n', 'client -T b');
  const r = await pair(RSTREAM, ['-B', '3000000000', '-C', '10'], ['-s', '127.0.0.1', '-C', '10']);
  exact(r.srv, 255, HEADER, 'raccept: Cannot allocate memory\n', 'server');
  exact(r.cli, 8, HEADER, 'rpoll: Connection refused\n', 'client');
});

test('rstream -i 100 (latency tests): above siw\'s inline limit of 80, the QP is refused — "rpoll: Invalid argument", exit 8', opts, async () => {
  const port = String(await freePort());
  exact(await runCli(RSTREAM, ['-s', '127.0.0.1', '-i', '100', '-p', port]), 8, HEADER, 'rpoll: Invalid argument\n', 'client');
  exact(await runCli(RSTREAM, ['-s', '127.0.0.1', '-i', '-1', '-T', 'b', '-p', port]), 255, HEADER, 'rconnect: Invalid argument\n', 'client -i -1 -T b');
});

test('rstream -p: a service name is looked up, a number above 65535 is kept to 16 bits, anything else is EAI_SERVICE', opts, async () => {
  const bad = await runCli(RSTREAM, ['-s', '127.0.0.1', '-p', 'no-such-service']);
  // The client prints the table header before it resolves the server's address.
  exact(bad, 248, `${HEADER}getaddrinfo: Servname not supported for ai_socktype\n`, '', '-p no-such-service');
  exact(await runCli(RSTREAM, ['-s', '127.0.0.1', '-p', '-5']), 248, `${HEADER}getaddrinfo: Servname not supported for ai_socktype\n`, '', '-p -5');
  const port = await freePort();
  const r = await pair(RSTREAM, ['-C', '10'], ['-s', '127.0.0.1', '-C', '10', '-p', String(port + 65536)], { port });
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
});

// -- ucmatose -----------------------------------------------------------------------------------

test('ucmatose -S -5: "failed message allocation" on the side that allocates, return status -1, exit 255', opts, async () => {
  const port = await freePort();
  const cli = await runCli(UCMATOSE, ['-s', '127.0.0.1', '-S', '-5', '-p', String(port)]);
  exact(cli, 255, 'cmatose: starting client\ncmatose: connecting\nfailed message allocation\ncmatose: failed to create messages: -1\ntest complete\nreturn status -1\n', '', 'client');
  const r = await pair(UCMATOSE, ['-S', '-5'], ['-s', '127.0.0.1']);
  exact(r.srv, 255, 'cmatose: starting server\nfailed message allocation\ncmatose: failed to create messages: -1\ncmatose: failing connection request\ntest complete\nreturn status -1\n', '', 'server');
  assert.match(r.cli.stdout, /cmatose: event: RDMA_CM_EVENT_REJECTED, error: -?\d+\n/, r.both);
  assert.notEqual(r.cli.code, 0, r.both);
});

test('ucmatose -c -1: "cmatose: unable to allocate memory for test nodes", exit 1', opts, async () => {
  exact(await runCli(UCMATOSE, ['-c', '-1', '-p', String(await freePort())]), 1, 'cmatose: unable to allocate memory for test nodes\n', '', 'server');
});

// -- cmtime -------------------------------------------------------------------------------------

test('cmtime -C ::1: the root binds it (IPv6), a leaf refuses it (its lookup is IPv4 only), exit 1', opts, async () => {
  const port = String(await freePort());
  const root = startCli(CMTIME, ['-b', '127.0.0.1', '-C', '::1', '-p', port, '-L'], { timeoutMs: 20_000 });
  try {
    const t0 = Date.now();
    while (!root.stdout().includes('Running as OOB root\n') && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 20));
    assert.equal(root.stdout(), 'Running as OOB root\n', root.stderr());
    const leaf = await runCli(CMTIME, ['-b', '127.0.0.1', '-C', '::1', '-p', port]);
    exact(leaf, 1, 'getaddrinfo error: Address family for hostname not supported\n', '', 'leaf');
  } finally {
    root.kill('SIGKILL');
  }
});

test('cmtime -P -1 / -n -1: the peer or thread table cannot be allocated — exit 1, nothing printed', opts, async () => {
  for (const o of [['-P', '-1'], ['-n', '-1']]) {
    exact(await runCli(CMTIME, ['-b', '127.0.0.1', '-C', '127.0.0.1', '-p', String(await freePort()), ...o]), 1, '', '', o.join(' '));
  }
});

test('cmtime -c -1 on both sides: the mesh forms, then the connection table cannot be allocated — exit 1', opts, async () => {
  const port = String(await freePort());
  const common = ['-b', '127.0.0.1', '-C', '127.0.0.1', '-p', port, '-c', '-1'];
  const root = startCli(CMTIME, [...common, '-L'], { timeoutMs: 20_000 });
  try {
    await waitListening(Number(port), { exited: root.done });
    const leaf = await runCli(CMTIME, common);
    exact(leaf, 1, '', '', 'leaf');
    exact(await root.done, 1, 'Running as OOB root\n', '', 'root');
  } finally {
    root.kill('SIGKILL');
  }
});

// -- rdma_server / rdma_client -------------------------------------------------------------------

test('rdma_server/rdma_client -p: EAI_SERVICE for a non-number ("rdma_getaddrinfo: ...", end -8, exit 248); a port above 65535 wraps', opts, async () => {
  exact(await runCli(SERVER, ['-p', 'abc']), 248, 'rdma_server: start\nrdma_getaddrinfo: Servname not supported for ai_socktype\nrdma_server: end -8\n', '', 'server');
  exact(await runCli(CLIENT, ['-s', '127.0.0.1', '-p', '-1']), 248, 'rdma_client: start\nrdma_getaddrinfo: Servname not supported for ai_socktype\nrdma_client: end -8\n', '', 'client');
  const port = await freePort();
  const srv = startCli(SERVER, ['-p', String(port + 65536)]);
  try {
    await waitListening(port, { exited: srv.done });
    const cli = await runCli(CLIENT, ['-s', '127.0.0.1', '-p', String(port + 2 * 65536)]);
    exact(cli, 0, 'rdma_client: start\nrdma_client: end 0\n', '', 'client');
    exact(await srv.done, 0, 'rdma_server: start\nrdma_server: end 0\n', '', 'server');
  } finally {
    srv.kill('SIGKILL');
  }
});

test('cmtime -t -1 is accepted (the timeout goes to the kernel as a __u32: a long wait): the QPs test runs', opts, async () => {
  const port = String(await freePort());
  const common = ['-b', '127.0.0.1', '-C', '127.0.0.1', '-p', port, '-c', '2', '-t', '-1'];
  const root = startCli(CMTIME, [...common, '-L'], { timeoutMs: 30_000 });
  try {
    await waitListening(Number(port), { exited: root.done });
    const leaf = await runCli(CMTIME, common, { timeoutMs: 30_000 });
    assert.match(leaf.stdout, /^Connect \(2\) QPs test$/m, describeRun('leaf', leaf));
    assert.doesNotMatch(leaf.stderr, /rdma_resolve_(addr|route)/, describeRun('leaf', leaf));
  } finally {
    root.kill('SIGKILL');
  }
});
