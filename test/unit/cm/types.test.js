// The rdma_cm typings as a consumer compiles them (strict, isolatedModules, NodeNext): the event
// union narrows on `event`, ids and channels are `using`-disposable, the waiting calls take an
// AbortSignal. test/types/cm-events.ts must compile, its `@ts-expect-error` lines included.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
const FLAGS = ['--noEmit', '--target', 'ES2022', '--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--lib', 'ES2022', '--types', 'node', '--strict', '--noUncheckedIndexedAccess', '--exactOptionalPropertyTypes', '--isolatedModules', '--verbatimModuleSyntax', '--skipLibCheck'];

test('test/types/cm-events.ts compiles against the package typings', { timeout: 120_000 }, async () => {
  const out = await new Promise((resolve) => {
    execFile(process.execPath, [tsc, ...FLAGS, 'test/types/cm-events.ts'], { cwd: root, timeout: 110_000 }, (e, stdout, stderr) => resolve({ code: e ? (e.code ?? 1) : 0, text: `${stdout}${stderr}` }));
  });
  assert.equal(out.code, 0, out.text);
});
