// The netopt addon's CRC-32 (native/src/crc32.c) against the table implementation of
// src/wire/roce/icrc.ts, on every path this CPU can run: the path chosen at load (crc32Impl) is
// the widest the CPU's flags allow, RDMACM_NETOPT_CRC selects a narrower one, and each path gives the tables'
// result for every length 0..600 at several offsets and chained registers, and for long inputs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/** The first CPU's fields in /proc/cpuinfo (flags: what the kernel enabled, AVX-512 state included), or null. */
function cpuInfo() {
  try {
    const text = readFileSync('/proc/cpuinfo', 'utf8');
    const field = (name) => new RegExp(`^${name}\\s*:(.*)$`, 'm').exec(text)?.[1].trim() ?? '';
    return { flags: new Set(field('flags').split(/\s+/)), vendor: field('vendor_id'), family: Number(field('cpu family')), model: Number(field('model')) };
  } catch {
    return null;
  }
}

const cpu = process.arch === 'x64' ? cpuInfo() : null;
const has = (...f) => cpu !== null && f.every((x) => cpu.flags.has(x));
const clmul = has('pclmulqdq', 'ssse3', 'sse4_1');
const vpclmul256 = clmul && has('vpclmulqdq', 'avx2');
const vpclmul512 = vpclmul256 && has('avx512f');
// Intel models that slow down under 512-bit registers (the kernel's zmm_exclusion_list) run 256-bit lanes.
const preferYmm = cpu?.vendor === 'GenuineIntel' && cpu.family === 6 && [0x55, 0x6a, 0x6c, 0x7d, 0x7e, 0x9d, 0x8c, 0x8d].includes(cpu.model);

/** The path expected under each RDMACM_NETOPT_CRC value (undefined: unset). */
const EXPECTED = [
  [undefined, vpclmul512 && !preferYmm ? 'vpclmul512' : vpclmul256 ? 'vpclmul256' : 'pclmul'],
  ['vpclmul512', vpclmul512 ? 'vpclmul512' : vpclmul256 ? 'vpclmul256' : 'pclmul'],
  ['vpclmul256', vpclmul256 ? 'vpclmul256' : 'pclmul'],
  ['pclmul', 'pclmul'],
];

// Run in a fresh process (the path is chosen when the addon loads): compares the addon's crc32
// with crc32Js and prints {impl, checked, bad}.
const CHILD = `
const { netopt } = await import(${JSON.stringify(join(ROOT, 'dist', 'util', 'netopt.js'))});
const { roce } = await import(${JSON.stringify(join(ROOT, 'dist', 'wire', 'index.js'))});
const { prng } = await import(${JSON.stringify(join(ROOT, 'test', 'lib', 'prng.js'))});
const m = netopt();
if (!m || typeof m.crc32 !== 'function') {
  console.log(JSON.stringify({ impl: null }));
  process.exit(0);
}
const next = prng(0x31c3);
const u32 = () => Math.floor(next() * 4294967296) >>> 0;
const d = new Uint8Array((1 << 20) + 3 + 128);
for (let i = 0; i < d.length; i++) d[i] = Math.floor(next() * 256);
const bad = [];
let checked = 0;
function check(a, n, prev) {
  const want = roce.crc32Js(d.subarray(a, a + n), prev);
  const got = m.crc32(d, a, a + n, prev);
  checked++;
  if (got !== want && bad.length < 5) bad.push({ n, a, prev, got, want });
  // the same range in two calls, the second continuing from the first's result
  if (n > 1 && checked % 3 === 0) {
    const cut = a + Math.floor(next() * n);
    const chained = m.crc32(d, cut, a + n, m.crc32(d, a, cut, prev));
    if (chained !== want && bad.length < 5) bad.push({ n, a, prev, cut, chained, want });
  }
}
const PREVS = [0, 0xffffffff, u32(), u32()];
for (let n = 0; n <= 600; n++) for (const a of [0, 1, 3, 8, 15, 33, 64]) for (const prev of PREVS) check(a, n, prev);
for (const n of [4096, 4136, 65536 + 17, (1 << 20) + 3]) for (const a of [0, 5, 64]) for (const prev of [0, u32()]) check(a, n, prev);
for (let i = 0; i < 200; i++) check(Math.floor(next() * 100), 600 + Math.floor(next() * 20000), u32());
console.log(JSON.stringify({ impl: m.crc32Impl, checked, bad }));
`;

for (const [cap, want] of EXPECTED) {
  test(`netopt crc32 ${cap === undefined ? 'as chosen' : `with RDMACM_NETOPT_CRC=${cap}`}: runs ${want} and equals the tables`, (t) => {
    if (!clmul) {
      t.skip('this CPU has no PCLMULQDQ (or is not x86-64): the addon exports no crc32');
      return;
    }
    const env = { ...process.env };
    if (cap === undefined) delete env.RDMACM_NETOPT_CRC;
    else env.RDMACM_NETOPT_CRC = cap;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', CHILD], { env, encoding: 'utf8', timeout: 110_000 });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    if (out.impl === null) {
      t.skip('netopt addon not built (npm run build:native)');
      return;
    }
    assert.equal(out.impl, want);
    assert.deepEqual(out.bad, []);
    assert.ok(out.checked > 601 * 7 * 4, `${out.checked} ranges checked`);
  });
}

test('netopt crc32: an unknown RDMACM_NETOPT_CRC value is ignored', (t) => {
  if (!clmul) {
    t.skip('this CPU has no PCLMULQDQ (or is not x86-64)');
    return;
  }
  const code = `const { netopt } = await import(${JSON.stringify(join(ROOT, 'dist', 'util', 'netopt.js'))});
    console.log(JSON.stringify(netopt()?.crc32Impl ?? null));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { env: { ...process.env, RDMACM_NETOPT_CRC: 'table' }, encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, r.stderr);
  const impl = JSON.parse(r.stdout);
  if (impl === null) {
    t.skip('netopt addon not built (npm run build:native)');
    return;
  }
  assert.equal(impl, EXPECTED[0][1]);
});
