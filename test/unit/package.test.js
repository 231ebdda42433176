// package.json: the typings a TypeScript user gets for each subpath are those of the entry point
// Node runs. `exports` serves module resolution node16/nodenext/bundler; `typesVersions` serves
// the older node10 resolution, and must name the same .d.ts for every subpath.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));

test('typesVersions names the typings exports names, for every subpath', () => {
  const viaExports = {};
  for (const [sub, target] of Object.entries(pkg.exports)) if (sub !== '.') viaExports[sub.slice(2)] = target.types.replace(/^\.\//, '');
  const viaTypesVersions = Object.fromEntries(Object.entries(pkg.typesVersions['*']).map(([sub, [file]]) => [sub, file]));
  assert.deepEqual(viaTypesVersions, viaExports);
  assert.equal(pkg.types, pkg.exports['.'].types);
  assert.equal(pkg.main, pkg.exports['.'].default);
});
