// Settings from the environment: envInt (non-negative integers, up to a maximum) and envNumber
// (non-negative numbers, fractions allowed); anything else, unset or blank gives the default.
import test from 'node:test';
import assert from 'node:assert/strict';
import { envInt, envNumber } from '../../../dist/util/env.js';

const NAME = 'RDMACM_TEST_ENV_VALUE';

function withEnv(value, fn) {
  if (value === undefined) delete process.env[NAME];
  else process.env[NAME] = value;
  try {
    return fn();
  } finally {
    delete process.env[NAME];
  }
}

test('envInt: integers from 0 to the maximum; the default otherwise', () => {
  const cases = [
    [undefined, 7],
    ['', 7],
    ['  ', 7],
    ['0', 0],
    ['42', 42],
    [' 42 ', 42],
    ['100', 100],
    ['101', 7],
    ['-1', 7],
    ['1.5', 7],
    ['ten', 7],
    ['1e2', 100],
  ];
  for (const [v, want] of cases) assert.equal(withEnv(v, () => envInt(NAME, 7, 100)), want, `envInt(${JSON.stringify(v)})`);
});

test('envNumber: non-negative numbers, fractions too; the default otherwise', () => {
  const cases = [
    [undefined, 50],
    ['', 50],
    ['0', 0],
    ['0.5', 0.5],
    ['200', 200],
    ['-3', 50],
    ['Infinity', 50],
    ['NaN', 50],
    ['soon', 50],
  ];
  for (const [v, want] of cases) assert.equal(withEnv(v, () => envNumber(NAME, 50)), want, `envNumber(${JSON.stringify(v)})`);
});
