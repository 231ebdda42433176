// rcopy end to end (docs/man/rcopy.1.md): a server and clients as separate processes on every
// device that connects RDMA_PS_TCP ids (both pinned to it), plus a client written here with the
// rsocket API that speaks rcopy.c's message layout byte by byte (header: version u8, command u8,
// len u16, data u32, id u64, little-endian) to check what the server does with it.
import test, { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, readFileSync, existsSync, statSync, chmodSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, createHash } from 'node:crypto';
import { REPO_ROOT, startCli, runCli, describeRun } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';
import { until } from '../lib/wait.js';
import { forEachDevice, Cap } from '../lib/devices.js';
import { sendAll, recvAll, fixed } from '../lib/rs-pair.js';
import { RsConn } from '../../dist/rsocket/index.js';

const RCOPY = join(REPO_ROOT, 'dist', 'cli', 'rcopy.js');
const opts = { skip: existsSync(RCOPY) ? false : `${RCOPY} is missing: run npm run build`, timeout: 120_000 };
const sha = (b) => createHash('sha256').update(b).digest('hex');
const PERF = /^(\d+) bytes in \d+\.\d\d seconds = (\d+\.\d\d|inf) Gb\/sec$/;

/** A client's stdout for a good copy of `n` bytes. */
function assertCopied(r, n, what) {
  const lines = r.stdout.split('\n');
  assert.equal(r.code, 0, describeRun(what, r));
  assert.equal(r.stderr, '', describeRun(what, r));
  assert.equal(lines[0], 'opening...transferring...closing...done', describeRun(what, r));
  assert.equal(lines[1].match(PERF)?.[1], String(n), describeRun(what, r));
  assert.equal(lines.length, 3);
}

/** rcopy.c's header, written out here field by field. */
function hdr(command, len, data = 0, id = 0n, version = 0) {
  const b = Buffer.alloc(16);
  b.writeUInt8(version, 0);
  b.writeUInt8(command, 1);
  b.writeUInt16LE(len, 2);
  b.writeUInt32LE(data >>> 0, 4);
  b.writeBigUInt64LE(id, 8);
  return b;
}
const parseHdr = (b) => ({ version: b[0], command: b[1], len: b.readUInt16LE(2), data: b.readInt32LE(4), id: b.readBigUInt64LE(8) });

usageTests();

forEachDevice([Cap.CM_TCP], (dev) => {
  const env = { RDMACM_DEVICE: dev.name };
  let dir;
  let srvDir;
  let port;
  let srv;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rcopy-cli-'));
    srvDir = mkdtempSync(join(tmpdir(), 'rcopy-srv-'));
    port = await freePort();
    srv = startCli(RCOPY, ['-p', String(port)], { env, cwd: srvDir, timeoutMs: 300_000 });
    await until(() => srv.stdout().startsWith('waiting for connection...') || srv.child.exitCode !== null, 20_000, 'the server listening');
    assert.equal(srv.child.exitCode, null, describeRun('server', { ...srv, code: srv.child.exitCode, stdout: srv.stdout(), stderr: srv.stderr(), ms: 0 }));
  });
  after(() => {
    srv?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    rmSync(srvDir, { recursive: true, force: true });
  });

  /** The server's output since `from` characters, once it waits for the next client. */
  async function serverSays(from) {
    await until(() => srv.stdout().slice(from).endsWith('waiting for connection...'), 20_000, () => `the server's next wait: ${JSON.stringify(srv.stdout().slice(from))}`);
    return srv.stdout().slice(from);
  }

  test('a 24 MiB file to a named destination: byte for byte, its mode, rdma-core\'s lines both sides', opts, async () => {
    const data = randomBytes(24 * 1024 * 1024 + 12345);
    const src = join(dir, 'big.bin');
    writeFileSync(src, data);
    chmodSync(src, 0o640);
    const dst = join(srvDir, 'copy-of-big.bin');
    const from = srv.stdout().length;
    const r = await runCli(RCOPY, [src, `127.0.0.1:${dst}`, '-p', String(port)], { env, timeoutMs: 120_000 });
    assertCopied(r, data.length, 'client');
    assert.equal(await serverSays(from), `client: 127.0.0.1\nopening: ${dst}, transferring...${data.length} bytes...closing...done\nwaiting for connection...`);
    assert.equal(sha(readFileSync(dst)), sha(data));
    assert.equal(statSync(dst).mode & 0o777, 0o640 & ~process.umask());
    assert.deepEqual(readdirSync(srvDir).sort(), ['copy-of-big.bin'], 'no temporary file left');
  });

  test('no destination: the source\'s path, taken in the server\'s directory', opts, async () => {
    const data = randomBytes(70_001);
    writeFileSync(join(dir, 'same-name.bin'), data);
    const from = srv.stdout().length;
    const r = await runCli(RCOPY, ['same-name.bin', '127.0.0.1', '-p', String(port)], { env, cwd: dir, timeoutMs: 60_000 });
    assertCopied(r, data.length, 'client');
    assert.match(await serverSays(from), /^client: 127\.0\.0\.1\nopening: same-name\.bin, transferring\.\.\.70001 bytes\.\.\.closing\.\.\.done\n/);
    assert.ok(readFileSync(join(srvDir, 'same-name.bin')).equals(data));
  });

  test('an option first means the server, as rcopy.c decides: a second one on the port fails (rbind or rlisten, as the CM has it), exit 255', opts, async () => {
    const r = await runCli(RCOPY, ['-p', String(port), 'same-name.bin', '127.0.0.1'], { env, timeoutMs: 30_000 });
    assert.equal(r.code, 255, describeRun('rcopy', r));
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^r(bind|listen) failed: (Address already in use|Cannot assign requested address)\n$/);
  });

  test('a source that cannot be opened: "opening..." and exit 255 (-1); the server goes on', opts, async () => {
    const from = srv.stdout().length;
    const r = await runCli(RCOPY, [join(dir, 'missing'), '127.0.0.1:x', '-p', String(port)], { env, timeoutMs: 30_000 });
    assert.equal(r.code, 255, describeRun('client', r));
    assert.equal(r.stdout, 'opening...');
    assert.equal(r.stderr, '');
    assert.equal(await serverSays(from), 'client: 127.0.0.1\nwaiting for connection...');
  });

  test('an empty source: refused as rcopy.c\'s mmap refuses it, exit 22 (EINVAL)', opts, async () => {
    writeFileSync(join(dir, 'empty'), '');
    const r = await runCli(RCOPY, [join(dir, 'empty'), '127.0.0.1:e', '-p', String(port)], { env, timeoutMs: 30_000 });
    assert.equal(r.code, 22, describeRun('client', r));
    assert.equal(r.stdout, 'opening...');
  });

  test('a destination the server cannot open: its errno as the exit status (ENOENT, 2), nothing written', opts, async () => {
    writeFileSync(join(dir, 'small'), 'abc');
    const from = srv.stdout().length;
    const dst = join(srvDir, 'no', 'such', 'dir', 'f');
    const r = await runCli(RCOPY, [join(dir, 'small'), `127.0.0.1:${dst}`, '-p', String(port)], { env, timeoutMs: 30_000 });
    assert.equal(r.code, 2, describeRun('client', r));
    assert.equal(r.stdout, 'opening...');
    assert.equal(await serverSays(from), `client: 127.0.0.1\nopening: ${dst}, unable to open destination file\nwaiting for connection...`);
  });

  test('no server on the port: "rconnect failed" with perror\'s text, exit 255', opts, async () => {
    writeFileSync(join(dir, 'small'), 'abc');
    const dead = await freePort();
    const r = await runCli(RCOPY, [join(dir, 'small'), '127.0.0.1', '-p', String(dead)], { env, timeoutMs: 60_000 });
    assert.equal(r.code, 255, describeRun('client', r));
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, 'rconnect failed\n: Connection refused\n', describeRun('client', r));
  });

  test('the message layout: a client that stops mid-file leaves no file under the final name, and the server takes the next one', opts, async () => {
    const final = join(srvDir, 'never-whole.bin');
    writeFileSync(final, 'old contents');
    const from = srv.stdout().length;
    const c = new RsConn();
    await c.connect({ address: '127.0.0.1', port });
    // OPEN: header + "path\0" padded to (strlen + 8) & ~7, data = st_mode.
    const name = Buffer.from(final);
    const padded = Buffer.alloc((name.length + 8) & ~7);
    name.copy(padded);
    await sendAll(c, Buffer.concat([hdr(1, 16 + padded.length, 0o100644, 0x1122334455667788n), padded]), fixed(1 << 20));
    const open = parseHdr(await recvAll(c, 16, fixed(16)));
    assert.deepEqual(open, { version: 0, command: 0x81, len: 16, data: 0, id: 0x1122334455667788n }, 'OPEN answered, its id echoed');
    // WRITE of 1 MiB, then only 1000 bytes and the connection goes.
    const size = Buffer.alloc(8);
    size.writeBigUInt64LE(1n << 20n);
    await sendAll(c, Buffer.concat([hdr(3, 24), size, randomBytes(1000)]), fixed(1 << 20));
    await c.close();
    const said = await serverSays(from);
    assert.equal(said, `client: 127.0.0.1\nopening: ${final}, transferring...1048576 bytes......error receiving data\nwaiting for connection...`);
    assert.equal(readFileSync(final, 'utf8'), 'old contents', 'the destination is untouched');
    assert.deepEqual(readdirSync(srvDir).filter((f) => f.startsWith('.rcopy')), [], 'the temporary file is gone');
    // rcopy.c would now refuse every OPEN with EBUSY (its file stays open); this server does not.
    writeFileSync(join(dir, 'after'), 'next');
    const r = await runCli(RCOPY, [join(dir, 'after'), `127.0.0.1:${final}`, '-p', String(port)], { env, timeoutMs: 30_000 });
    assertCopied(r, 4, 'client');
    assert.equal(readFileSync(final, 'utf8'), 'next');
  });

  test('a server killed mid-file: the client stops (not 0), prints no "done", and no file has the final name', opts, async () => {
    const own = mkdtempSync(join(tmpdir(), 'rcopy-killed-'));
    const p2 = await freePort();
    const victim = startCli(RCOPY, ['-p', String(p2)], { env, cwd: own, timeoutMs: 120_000 });
    try {
      await until(() => victim.stdout().startsWith('waiting for connection...'), 20_000, 'the second server listening');
      const src = join(dir, 'large.bin');
      writeFileSync(src, randomBytes(128 * 1024 * 1024));
      const client = startCli(RCOPY, [src, '127.0.0.1:gone.bin', '-p', String(p2)], { env, timeoutMs: 100_000 });
      await until(() => victim.stdout().includes('bytes...') || client.child.exitCode !== null, 30_000, 'the transfer under way');
      victim.kill('SIGKILL');
      const r = await client.done;
      assert.ok(!r.timedOut, describeRun('client', r));
      assert.notEqual(r.code, 0, describeRun('client', r));
      assert.equal(r.stdout, 'opening...transferring...closing...', describeRun('client', r));
      assert.ok(!existsSync(join(own, 'gone.bin')), 'nothing under the final name');
    } finally {
      victim.kill('SIGKILL');
      await victim.done;
      rmSync(own, { recursive: true, force: true });
    }
  });

  test('bad messages: another version ends the connection with rcopy.c\'s line; an unknown command gets EINVAL', opts, async () => {
    let from = srv.stdout().length;
    let c = new RsConn();
    await c.connect({ address: '127.0.0.1', port });
    await sendAll(c, hdr(1, 16, 0, 0n, 1), fixed(16));
    assert.equal((await recvAll(c, 16, fixed(16))).length, 0, 'no answer: the server closed');
    await c.close();
    assert.equal(await serverSays(from), 'client: 127.0.0.1\ninvalid version 1 or length 16\nwaiting for connection...');
    from = srv.stdout().length;
    c = new RsConn();
    await c.connect({ address: '127.0.0.1', port });
    await sendAll(c, hdr(9, 16, 0, 42n), fixed(16));
    assert.deepEqual(parseHdr(await recvAll(c, 16, fixed(16))), { version: 0, command: 0x89, len: 16, data: 22, id: 42n });
    await c.close();
    assert.equal(await serverSays(from), 'client: 127.0.0.1\nwaiting for connection...');
  });
}, 'rcopy');

function usageTests() {
  const USAGE = 'usage 1: rcopy [options]\n\t     starts the server application\n\t[-p  port_number]\nusage 2: rcopy source server[:destination] [options]\n\t     source - file name and path\n\t     server - name or address\n\t     destination - file name and path\n\t[-p  port_number]\n';
  describe('rcopy command line', () => {
    test('one operand: the usage on stdout, exit 1', opts, async () => {
      const r = await runCli(RCOPY, ['file'], { timeoutMs: 10_000 });
      assert.equal(r.code, 1, describeRun('rcopy', r));
      assert.equal(r.stdout, USAGE);
    });
    test('an unknown option or -p without its argument: getopt\'s line on stderr, the usage, exit 1', opts, async () => {
      for (const [args, err] of [
        [['-x'], "rcopy: invalid option -- 'x'\n"],
        [['-p'], "rcopy: option requires an argument -- 'p'\n"],
        [['a', 'b', '-q'], "rcopy: invalid option -- 'q'\n"],
      ]) {
        const r = await runCli(RCOPY, args, { timeoutMs: 10_000 });
        assert.equal(r.code, 1, describeRun(args.join(' '), r));
        assert.equal(r.stderr, err);
        assert.equal(r.stdout, USAGE);
      }
    });
    test('a server port that is no service: getaddrinfo\'s message, exit 248 (EAI_SERVICE)', opts, async () => {
      const r = await runCli(RCOPY, ['-p', 'no-such-service-x'], { timeoutMs: 10_000 });
      assert.equal(r.code, 248, describeRun('rcopy', r));
      assert.equal(r.stdout, 'getaddrinfo failed: Servname not supported for ai_socktype\n');
    });
  });
}
