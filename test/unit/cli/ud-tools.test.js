// udaddy and mckey without a device: option parsing, usage, and the refusals that come before any
// RDMA resource (exact lines and exit codes of rdma-core's udaddy.c / mckey.c); inet_ntop of GIDs.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inetNtop6 } from '../../../dist/cli/addresses.js';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'dist', 'cli');
const UDADDY = join(CLI, 'udaddy.js');
const MCKEY = join(CLI, 'mckey.js');

const lines = (...l) => l.map((x) => `${x}\n`).join('');
function run(script, args) {
  const r = spawnSync(process.execPath, [script, ...args], { encoding: 'latin1', timeout: 20_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, signal: r.signal };
}

const UDADDY_USAGE = lines(
  'usage: udaddy',
  '\t[-s server_address]',
  '\t[-b bind_address]',
  '\t[-f address_format]',
  '\t    name, ip, ipv6, or gid',
  '\t[-P port_space]',
  '\t    udp or ipoib',
  '\t[-c connections]',
  '\t[-C message_count]',
  '\t[-S message_size]',
  '\t[-t type_of_service]',
  '\t[-p port_space - 0x111 for UDP (default), 0x2 for IPOIB]',
);

const MCKEY_USAGE = lines(
  'usage: mckey',
  '\t-m multicast_address',
  '\t[-M unmapped_multicast_address]',
  '\t replaces -m and requires -b',
  '\t[-s(ender)]',
  '\t[-b bind_address]',
  '\t[-c connections]',
  '\t[-C message_count]',
  '\t[-S message_size]',
  '\t[-p port_space - 0x111 for UDP (default), 0x2 for IPOIB]',
  '\t[-o join as a send-only full-member]',
  '\t[-l join without multicast loopback]',
);

test('udaddy: an unknown option or a missing argument: getopt on stderr, usage on stdout, exit 1', () => {
  let r = run(UDADDY, ['-x']);
  assert.deepEqual(r, { code: 1, stdout: UDADDY_USAGE, stderr: "udaddy: invalid option -- 'x'\n", signal: null });
  r = run(UDADDY, ['-s']);
  assert.deepEqual(r, { code: 1, stdout: UDADDY_USAGE, stderr: "udaddy: option requires an argument -- 's'\n", signal: null });
  // -o and -l are mckey's, -m too: udaddy refuses them.
  r = run(UDADDY, ['-c', '2', '-m', '239.1.1.1']);
  assert.equal(r.stderr, "udaddy: invalid option -- 'm'\n");
  assert.equal(r.code, 1);
});

test('udaddy: -c below 0 cannot allocate its nodes (exit 1, before any output)', () => {
  const r = run(UDADDY, ['-s', '127.0.0.1', '-c', '-1']);
  assert.deepEqual(r, { code: 1, stdout: 'udaddy: unable to allocate memory for test nodes\n', stderr: '', signal: null });
});

test('udaddy: a -p that is no port space: rdma_create_id fails (client: exit 1 silently; server: listen request failed)', () => {
  let r = run(UDADDY, ['-s', '127.0.0.1', '-p', '5']);
  assert.deepEqual(r, { code: 1, stdout: '', stderr: '', signal: null });
  r = run(UDADDY, ['-p', '0x1066']);
  assert.equal(r.stdout, lines('udaddy: starting server', 'test complete', 'return status -1'));
  assert.equal(r.stderr, 'udaddy: listen request failed: Invalid argument\n');
  assert.equal(r.code, 255);
});

test('udaddy: rdma_getaddrinfo failures print once and return the EAI code; -f/-P warnings go to stderr', () => {
  let r = run(UDADDY, ['-f', 'ip', '-s', 'localhost']);
  assert.equal(r.stdout, lines('udaddy: starting client', 'rdma_getaddrinfo error: Name or service not known', 'test complete', 'return status -2'));
  assert.equal(r.stderr, '');
  assert.equal(r.code, 254);
  r = run(UDADDY, ['-P', 'xyz', '-f', 'foo', '-f', 'ip', '-b', 'localhost']);
  assert.equal(r.stdout, lines('udaddy: starting server', 'rdma_getaddrinfo error: Name or service not known', 'test complete', 'return status -2'));
  assert.equal(r.stderr, 'Warning: unknown port space format\nWarning: unknown address format\n');
  assert.equal(r.code, 254);
  // Accepted spellings (strncasecmp prefixes) warn about nothing.
  r = run(UDADDY, ['-P', 'IPoIB', '-P', 'UDPx', '-f', 'NAME', '-f', 'ipv6', '-f', 'ip', '-s', 'localhost']);
  assert.equal(r.stderr, '');
  assert.equal(r.code, 254);
});

test('udaddy: -f gid gives AF_IB addresses, which no device here resolves (ENODEV)', () => {
  const r = run(UDADDY, ['-f', 'gid', '-s', '127.0.0.1']);
  assert.equal(r.stdout, lines('udaddy: starting client', 'udaddy: connecting', 'test complete', 'return status -1'));
  assert.equal(r.stderr, 'udaddy: failure getting addr: No such device\n');
  assert.equal(r.code, 255);
});

test('mckey: an unknown option or a missing argument: getopt on stderr, usage on stdout, exit 1', () => {
  let r = run(MCKEY, ['-x']);
  assert.deepEqual(r, { code: 1, stdout: MCKEY_USAGE, stderr: "mckey: invalid option -- 'x'\n", signal: null });
  r = run(MCKEY, ['-m']);
  assert.deepEqual(r, { code: 1, stdout: MCKEY_USAGE, stderr: "mckey: option requires an argument -- 'm'\n", signal: null });
  r = run(MCKEY, ['-s', '-t', '1']);
  assert.equal(r.stderr, "mckey: invalid option -- 't'\n");
  assert.equal(r.code, 1);
});

test('mckey: -M needs -b (exit 1); -c below 0; a -p that is no port space', () => {
  let r = run(MCKEY, ['-M', 'ff0e::1', '-s']);
  assert.deepEqual(r, { code: 1, stdout: 'unmapped multicast address requires binding to source address\n', stderr: '', signal: null });
  r = run(MCKEY, ['-m', '239.1.1.1', '-c', '-3']);
  assert.deepEqual(r, { code: 1, stdout: 'mckey: unable to allocate memory for test nodes\n', stderr: '', signal: null });
  r = run(MCKEY, ['-m', '239.1.1.1', '-p', '0x0112']);
  assert.deepEqual(r, { code: 1, stdout: '', stderr: '', signal: null });
});

test('mckey: no -m, or an address that does not resolve: getaddrinfo failed, return status -2', () => {
  const fail = (role) => lines(`mckey: starting ${role}`, 'getaddrinfo failed (Name or service not known) - invalid hostname or IP address', 'test complete', 'return status -2');
  let r = run(MCKEY, []);
  assert.equal(r.stdout, fail('server'));
  assert.equal(r.code, 254);
  r = run(MCKEY, ['-s', '-m', '']);
  assert.equal(r.stdout, fail('client'));
  assert.equal(r.code, 254);
  // The bind address is resolved first.
  r = run(MCKEY, ['-m', '239.1.1.1', '-b', '']);
  assert.equal(r.stdout, fail('server'));
  assert.equal(r.stderr, '');
  assert.equal(r.code, 254);
});

test('inetNtop6: glibc inet_ntop(AF_INET6) forms of GIDs', () => {
  const g = (hex) => Uint8Array.from(Buffer.from(hex.replace(/[^0-9a-f]/g, ''), 'hex'));
  const cases = [
    ['00000000000000000000ffffef010101', '::ffff:239.1.1.1'],
    ['00000000000000000000ffff7f000001', '::ffff:127.0.0.1'],
    ['00000000000000000000000000000000', '::'],
    ['00000000000000000000000000000001', '::1'],
    ['0000000000000000000000000a000001', '::10.0.0.1'],
    ['ff0e0000000000000000ffffef010101', 'ff0e::ffff:ef01:101'],
    ['fe800000000000000211223344556677', 'fe80::211:2233:4455:6677'],
    ['20010db8000000010000000000000001', '2001:db8:0:1::1'],
    ['20010db8000000000001000000000001', '2001:db8::1:0:0:1'],
    ['00010000000100000001000000010000', '1:0:1:0:1:0:1:0'],
    ['ff120000000000000000000000000000', 'ff12::'],
    ['0000000000000000000000000000ffff', '::ffff'],
  ];
  for (const [hex, text] of cases) assert.equal(inetNtop6(g(hex)), text, hex);
});
