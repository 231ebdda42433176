// The README's first commands set up and run everything from a fresh clone: its first code block
// starts with `npm install && npm start` (build, then every tool end to end over the soft devices)
// and `npm test`; CI (.ci/run) runs exactly that test command, then the interop suite.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const read = (f) => readFileSync(join(ROOT, f), 'utf8');

/** The commands of a shell text: its lines without comments, blank lines and `set` lines. */
const commands = (sh) => sh.split('\n').map((l) => l.replace(/(^|\s)#.*$/, '').trim()).filter((l) => l !== '' && !/^set\s/.test(l));

test('the README\'s first two commands are the clone\'s set-up-and-run and its tests', () => {
  const first = /```[^\n]*\n([\s\S]*?)```/.exec(read('README.md'));
  assert.ok(first, 'the README has a code block');
  assert.deepEqual(commands(first[1]).slice(0, 2), ['npm install && npm start', 'npm test']);
  const pkg = JSON.parse(read('package.json'));
  assert.ok(pkg.scripts.start && pkg.scripts.test);
});

test('CI runs the README\'s test command, then the interop suite', () => {
  const run = commands(read('.ci/run'));
  const t = run.indexOf('npm test');
  assert.ok(t >= 0, '.ci/run runs npm test');
  assert.ok(!run.slice(0, t).some((c) => /\bnpm (run )?test\b|node --test/.test(c)), 'no other test command before it');
  const interop = run.findIndex((c) => /\bnpm run test:interop\b/.test(c));
  assert.ok(interop > t, 'then the interop suite');
});
