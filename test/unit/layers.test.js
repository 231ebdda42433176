// The layering rule of docs/design/layers.md, checked on the sources:
// wire ← verbs ← transport ← cm ← rsocket ← cli; util and the top-level error/trace modules are
// shared; nothing imports upward and there is no import cycle between layers. Two seams:
// transports (src/transport/*, and the native backend src/native/) implement the CM's interface,
// so they may import src/cm/transport.ts (and nothing
// else of cm), as a kernel driver includes <rdma/iw_cm.h>; and the verbs and CM layers never load
// a transport (src/transports.ts is for entry points).
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
      if ((from === 'verbs' || from === 'cm') && (rel === 'transports.js' || rel === 'transports.ts')) bad.push(`${relative(SRC, f)} -> ${rel} (loads transports)`);
      if (!(to in RANK) || !(from in RANK)) continue;
      // The CM transport interface is the one file of cm/ a transport implements.
      if ((from === 'transport' || from === 'native') && (rel === 'cm/transport.js' || rel === 'cm/transport.ts')) continue;
      if (RANK[to] > RANK[from]) bad.push(`${relative(SRC, f)} -> ${rel}`);
      if (from === 'wire' && to !== 'wire') bad.push(`${relative(SRC, f)} -> ${rel} (wire is pure)`);
    }
  }
  assert.deepEqual(bad, []);
});

test('the CM and verbs layers name no concrete transport', () => {
  for (const layer of ['cm', 'verbs']) {
    for (const f of files(join(SRC, layer))) {
      const text = readFileSync(f, 'utf8');
      assert.doesNotMatch(text, /from '[^']*transport\/(iwarp|roce)|import '[^']*transport\/|from '[^']*native\/|import '[^']*native\/|IwarpQp|RoceQp|NativeQp|\bCep\b/, relative(SRC, f));
    }
  }
});

test('wire modules are pure: no sockets, timers or process state', () => {
  for (const f of files(join(SRC, 'wire'))) {
    const text = readFileSync(f, 'utf8');
    assert.doesNotMatch(text, /from 'node:(net|dgram|dns|child_process|fs)'|setTimeout|setImmediate|process\.on/, relative(SRC, f));
  }
});

/**
 * The value imports of every source file (`import type` and all-type `import { type … }` lists
 * are erased by the compiler and load nothing, so they are left out).
 */
function valueImports() {
  const graph = new Map();
  for (const f of files(SRC)) {
    const text = readFileSync(f, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '');
    const out = [];
    for (const m of text.matchAll(/^\s*(?:import|export)\s+(type\s+)?([^'";]*?)\s*(?:from\s+)?'(\.[^']+)'/gm)) {
      if (m[1]) continue;
      const names = m[2].trim();
      if (/^\{[^}]*\}$/.test(names) && names.slice(1, -1).split(',').map((n) => n.trim()).filter(Boolean).every((n) => n.startsWith('type '))) continue;
      out.push(resolve(dirname(f), m[3]).replace(/\.js$/, '.ts'));
    }
    graph.set(f, out);
  }
  return graph;
}

/** The strongly connected groups of more than one file (Tarjan's algorithm). */
function cycles(graph) {
  let next = 0;
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) === index.get(v)) {
      const group = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        group.push(relative(SRC, w));
      } while (w !== v);
      if (group.length > 1) found.push(group.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

test('no value-import cycle: every module can be loaded before the modules that use it', () => {
  assert.deepEqual(cycles(valueImports()), []);
});

test('the cycle finder finds a cycle of value imports and ignores one of type imports', () => {
  const a = join(SRC, 'a.ts');
  const b = join(SRC, 'b.ts');
  const c = join(SRC, 'c.ts');
  assert.deepEqual(cycles(new Map([[a, [b]], [b, [c]], [c, [a]]])), [['a.ts', 'b.ts', 'c.ts']]);
  assert.deepEqual(cycles(new Map([[a, [b]], [b, []], [c, [a]]])), []);
});
