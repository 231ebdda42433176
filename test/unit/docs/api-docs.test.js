// The API reference is generated from the doc comments (npm run docs → docs/api/): every exported
// symbol of every entry point — functions, classes, their methods and accessors, interfaces, type
// aliases, enums, constants, namespaces — has documentation, and no comment links to a symbol that
// cannot be resolved. TypeDoc validates; a warning fails. (Fields of the struct-like interfaces and
// enum members, named as rdma-core names them, are not required.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

test('every exported symbol is documented and every doc link resolves (TypeDoc validation)', () => {
  const r = spawnSync(process.execPath, [join(ROOT, 'scripts', 'api-docs.mjs'), '--check'], { cwd: ROOT, encoding: 'utf8', timeout: 110_000, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } });
  const warnings = `${r.stdout}${r.stderr}`.split('\n').filter((l) => /\[(warning|error)\]/.test(l));
  assert.deepEqual(warnings, [], 'undocumented exports or broken links');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /every exported symbol is documented/);
});

test('the reference is built by npm run docs and covers every entry point of the package', () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const cfg = JSON.parse(readFileSync(join(ROOT, 'typedoc.json'), 'utf8'));
  assert.equal(pkg.scripts.docs, 'node scripts/api-docs.mjs');
  assert.equal(cfg.out, 'docs/api');
  const fromExports = Object.values(pkg.exports).map((e) => e.types.replace(/^\.\/dist\//, 'src/').replace(/\.d\.ts$/, '.ts')).sort();
  assert.deepEqual([...cfg.entryPoints].sort(), fromExports);
});
