// package.json: the typings a TypeScript user gets for each subpath are those of the entry point
// Node runs. `exports` serves module resolution node16/nodenext/bundler; `typesVersions` serves
// the older node10 resolution, and must name the same .d.ts for every subpath. And every entry
// point loads from CommonJS too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));

test('typesVersions names the typings exports names, for every subpath', () => {
  const viaExports = {};
  for (const [sub, target] of Object.entries(pkg.exports)) if (sub !== '.') viaExports[sub.slice(2)] = target.types.replace(/^\.\//, '');
  const viaTypesVersions = Object.fromEntries(Object.entries(pkg.typesVersions['*']).map(([sub, [file]]) => [sub, file]));
  assert.deepEqual(viaTypesVersions, viaExports);
  assert.equal(pkg.types, pkg.exports['.'].types);
  assert.equal(pkg.main, pkg.exports['.'].default);
});

// Node 20.19 and 22.12 load an ES module through require() when no module it loads awaits at
// the top level: every entry point (the tools' loader aside) keeps that open to CommonJS users.
test('every entry point loads through require() from CommonJS', { skip: !process.features.require_module && 'no require(esm) in this Node' }, () => {
  for (const [sub, target] of Object.entries(pkg.exports)) {
    const file = new URL(`../../${target.default}`, import.meta.url).pathname;
    const r = spawnSync(process.execPath, ['-e', `const m = require(${JSON.stringify(file)}); console.log(Object.keys(m).length > 0)`], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(r.stdout.trim(), 'true', `${sub}: ${r.stderr.split('\n').find((l) => l.includes('Error')) ?? r.stderr}`);
  }
});
