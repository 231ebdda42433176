import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { objectArray, objectSlots, doubleArray } from '../../../dist/util/arrays.js';

test('objectArray is empty; objectSlots has n nulls; doubleArray has n zeros', () => {
  assert.deepEqual(objectArray(), []);
  assert.deepEqual(objectSlots(2), [null, null]);
  assert.deepEqual(objectSlots(0), []);
  assert.deepEqual(doubleArray(3), [0, 0, 0]);
  assert.deepEqual(doubleArray(0), []);
});

// The point of these helpers is the elements kind V8 gives the arrays; check it with V8's own
// introspection in a child process (natives syntax is a command-line flag).
test('the arrays are born with the elements kind they will have (V8)', () => {
  const url = new URL('../../../dist/util/arrays.js', import.meta.url).href;
  const src = `
    const { objectArray, objectSlots, doubleArray } = await import(${JSON.stringify(url)});
    const o = objectArray(); const s = objectSlots(2); const d = doubleArray(4);
    const out = [%HasObjectElements(o), %HasObjectElements(s), %HasDoubleElements(d)];
    // a double stored into the double array keeps its hidden class; into a fresh small-integer one it does not
    const d2 = doubleArray(4); d2[1] = 2 ** 32 + 0.5; const smi = new Array(4).fill(0); const smi2 = new Array(4).fill(0); smi2[1] = 2 ** 32 + 0.5;
    out.push(%HaveSameMap(d, d2), %HaveSameMap(smi, smi2));
    // object slots written in place keep theirs; an empty array written at 0 grows
    const s2 = objectSlots(2); s2[0] = {}; s2[1] = {};
    out.push(%HaveSameMap(s, s2), s2.length);
    console.log(JSON.stringify(out));`;
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', src], { encoding: 'utf8', timeout: 20_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout.trim()), [true, true, true, true, false, true, 2]);
});
