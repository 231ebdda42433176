// The layering rule of docs/design/layers.md, checked on the sources:
// wire ← verbs ← transport ← cm ← rsocket ← cli; util and the top-level error/trace modules are
// shared; nothing imports upward and there is no import cycle between layers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');
const RANK = { wire: 0, util: 0, verbs: 1, transport: 2, cm: 3, rsocket: 4, cli: 5, native: 2 };

function files(dir) {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

function layerOf(file) {
  const top = relative(SRC, file).split('/')[0];
  return top.endsWith('.ts') ? null : top; // src/*.ts (index, errors, errno, trace) are shared
}

test('no source file imports a higher layer', () => {
  const bad = [];
  for (const f of files(SRC)) {
    const from = layerOf(f);
    if (from === null) continue;
    const text = readFileSync(f, 'utf8');
    for (const m of text.matchAll(/(?:import|export)[^'";]*?from\s+'(\.[^']+)'|import\s+'(\.[^']+)'/g)) {
      const spec = m[1] ?? m[2];
      const target = resolve(dirname(f), spec);
      const rel = relative(SRC, target);
      const to = rel.includes('/') ? rel.split('/')[0] : null;
      if (to === null) {
        // src/index.ts is the public face: only the CLI may use it.
        if (rel.startsWith('index') && from !== 'cli') bad.push(`${relative(SRC, f)} -> ${rel}`);
        continue;
      }
      if (!(to in RANK) || !(from in RANK)) continue;
      if (RANK[to] > RANK[from]) bad.push(`${relative(SRC, f)} -> ${rel}`);
      if (from === 'wire' && to !== 'wire') bad.push(`${relative(SRC, f)} -> ${rel} (wire is pure)`);
    }
  }
  assert.deepEqual(bad, []);
});

test('wire modules are pure: no sockets, timers or process state', () => {
  for (const f of files(join(SRC, 'wire'))) {
    const text = readFileSync(f, 'utf8');
    assert.doesNotMatch(text, /from 'node:(net|dgram|dns|child_process|fs)'|setTimeout|setImmediate|process\.on/, relative(SRC, f));
  }
});
