// The FPDU decoder's running counts pass 2^31 bytes after 2 GiB of one connection's stream. Had
// they been number fields that held small integers until then, the first larger value would change
// the field's representation, deprecate the decoder's hidden class and throw away every function
// optimised against it in the middle of the transfer. Checked with V8's own introspection in a
// child process (natives syntax is a command-line flag), with the counts themselves.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

const WIRE = new URL('../../../dist/wire/index.js', import.meta.url).href;

test('the decoder stays under the code optimised for it once its byte count passes 2^31 (V8)', { timeout: 60_000 }, () => {
  const src = `
    const { FpduDecoder, encodeFpdu, RdmapOpcode } = await import(${JSON.stringify(WIRE)});
    const payload = new Uint8Array(65_000);
    const fpdu = encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: 0x1234, to: 0 }, payload);
    let seen = 0;
    const sink = { onHeader() {}, onPayload(b, s, e) { seen += e - s; }, onEnd() {} };
    const dec = new FpduDecoder(sink, { crc: false });
    const other = new FpduDecoder(sink, { crc: false });
    function counts(d) { return d.bytes + d.fpdus; }
    %PrepareFunctionForOptimization(counts);
    counts(dec); counts(other);
    %OptimizeFunctionOnNextCall(counts);
    counts(dec);
    const before = (%GetOptimizationStatus(counts) & 16) !== 0;
    const n = Math.ceil(2 ** 31 / fpdu.length) + 10;
    for (let i = 0; i < n; i++) dec.push(fpdu);
    const total = counts(dec);
    const after = (%GetOptimizationStatus(counts) & 16) !== 0;
    console.log(JSON.stringify([before, after, %HaveSameMap(dec, other), dec.bytes === n * fpdu.length, dec.fpdus === n, total === n * fpdu.length + n, seen === n * payload.length, dec.bytes > 2 ** 31]));`;
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', src], { encoding: 'utf8', timeout: 50_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout.trim()), [true, true, true, true, true, true, true, true]);
});
