// The service argument of rdma_getaddrinfo as glibc's getaddrinfo reads it: a decimal number
// (strtoul, stored in an int) kept to 16 bits, a negative one or a non-number looked up as a name
// in /etc/services (EAI_SERVICE when unknown); and an address of the other family than the hint
// asks for is EAI_ADDRFAMILY.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { getaddrinfo, GaiError } from '../../../dist/index.js';
import { servicePort } from '../../../dist/cm/addr.js';

test('numeric services: strtoul, then the low 16 bits of the int; negative ints are not numbers', async () => {
  const cases = [
    ['7471', 7471],
    ['0', 0],
    ['', 0],
    [' 12', 12],
    ['+12', 12],
    ['65535', 65535],
    ['65536', 0],
    ['99999', 34463],
    ['4294967297', 1], // the int keeps the low 32 bits
    ['-4294967295', 1], // strtoul negates modulo 2^64
    ['-5', -1],
    ['2147483648', -1], // INT_MIN as an int: negative
    ['0x10', -1],
    ['1e3', -1],
    ['12 ', -1],
    ['no-such-service-name', -1],
  ];
  for (const [s, want] of cases) assert.equal(await servicePort(s), want, JSON.stringify(s));
});

test('service names come from /etc/services (TCP), aliases too', { skip: existsSync('/etc/services') ? false : 'no /etc/services' }, async () => {
  const line = readFileSync('/etc/services', 'latin1')
    .split('\n')
    .map((l) => l.split('#')[0].trim().split(/\s+/))
    .find((f) => /^\d+\/tcp$/.test(f[1] ?? '') && f[0] && !/^\d/.test(f[0]));
  assert.ok(line, 'a TCP service in /etc/services');
  assert.equal(await servicePort(line[0]), Number(line[1].split('/')[0]));
  const r = await getaddrinfo('127.0.0.1', line[0]);
  assert.equal(r.dstAddr.port, Number(line[1].split('/')[0]));
});

test('rdma_getaddrinfo: EAI_SERVICE (-8) for an unknown service; EAI_ADDRFAMILY (-9) for ::1 with an IPv4 hint', async () => {
  await assert.rejects(getaddrinfo('127.0.0.1', 'no-such-service-name'), (e) => e instanceof GaiError && e.eai === -8 && e.message === 'Servname not supported for ai_socktype');
  await assert.rejects(getaddrinfo('127.0.0.1', '-1'), (e) => e instanceof GaiError && e.eai === -8);
  assert.equal((await getaddrinfo('127.0.0.1', '70000')).dstAddr.port, 70000 - 65536);
  await assert.rejects(getaddrinfo('::1', '1', { family: 'IPv4' }), (e) => e instanceof GaiError && e.eai === -9 && e.message === 'Address family for hostname not supported');
});
