// The layering rule of docs/design/layers.md, checked on the sources:
// wire ← verbs ← transport ← cm ← rsocket ← http ← cli; util and the top-level error/trace modules are
// shared; nothing imports upward and there is no import cycle between layers. The transports are
// the folders the transport manifest (src/transports.ts) names: src/transport/<name>/, and the
// native backend's src/native/. Two seams: a transport implements the CM's interface, so it may
// import src/cm/transport.ts (and nothing else of cm), as a kernel driver includes
// <rdma/iw_cm.h>; and the verbs and CM layers never load a transport nor name one (the manifest
// and the settings namespaces are for entry points).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TRANSPORTS } from '../../dist/transports.js';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');
const TRANSPORT = 2;
const RANK = { wire: 0, util: 0, verbs: 1, transport: TRANSPORT, cm: 3, rsocket: 4, stat: 4, http: 5, cli: 6 };
// A transport's top folder is of the transport layer (src/transport/, src/native/).
for (const t of TRANSPORTS) RANK[t.dir.split('/')[0]] = TRANSPORT;
/** The top-level modules that load transports: for entry points, never for verbs or cm. */
const LOADERS = ['transports', 'transport-settings'];

function files(dir) {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** `src/`-relative path → text of every source file. */
function sources() {
  return new Map(files(SRC).map((f) => [relative(SRC, f), readFileSync(f, 'utf8')]));
}

/** The layer of a `src/`-relative path, or null for src/*.ts (index, errors, errno, trace: shared). */
function layerOf(rel) {
  return rel.includes('/') ? rel.split('/')[0] : null;
}

/** The `src/`-relative paths a module imports (relative specifiers only). */
function importsOf(rel, text) {
  const out = [];
  for (const m of text.matchAll(/(?:import|export)[^'";]*?from\s+'(\.[^']+)'|import\s+'(\.[^']+)'|import\('(\.[^']+)'\)/g)) {
    out.push(relative(SRC, resolve(SRC, dirname(rel), m[1] ?? m[2] ?? m[3])));
  }
  return out;
}

const stem = (rel) => rel.replace(/\.[jt]s$/, '');

/** The imports that break the layering, as `from -> to (why)` lines. */
function layerViolations(srcs) {
  const bad = [];
  for (const [f, text] of srcs) {
    const from = layerOf(f);
    if (from === null) continue;
    for (const rel of importsOf(f, text)) {
      const to = layerOf(rel);
      if (to === null) {
        // src/index.ts is the public face: only the CLI may use it.
        if (stem(rel) === 'index' && from !== 'cli') bad.push(`${f} -> ${rel}`);
        if ((from === 'verbs' || from === 'cm') && LOADERS.includes(stem(rel))) bad.push(`${f} -> ${rel} (loads transports)`);
        continue;
      }
      if (!(to in RANK) || !(from in RANK)) continue;
      // The CM transport interface is the one file of cm/ a transport implements.
      if (RANK[from] === TRANSPORT && stem(rel) === 'cm/transport') continue;
      if (RANK[to] > RANK[from]) bad.push(`${f} -> ${rel}`);
      if (from === 'wire' && to !== 'wire') bad.push(`${f} -> ${rel} (wire is pure)`);
    }
  }
  return bad;
}

/** Where the CM and verbs layers name a transport: an import of its folder, or one of its classes. */
function transportMentions(srcs) {
  const classes = new Set();
  for (const [f, text] of srcs) {
    if (TRANSPORTS.some((t) => f.startsWith(`${t.dir}/`))) for (const m of text.matchAll(/export (?:abstract )?class (\w+)/g)) classes.add(m[1]);
  }
  const named = new RegExp(`\\b(${[...classes].join('|')})\\b`);
  const bad = [];
  for (const [f, text] of srcs) {
    if (!['cm', 'verbs'].includes(layerOf(f))) continue;
    for (const rel of importsOf(f, text)) {
      const t = TRANSPORTS.find((x) => rel.startsWith(`${x.dir}/`));
      if (t) bad.push(`${f} -> ${rel} (${t.name})`);
    }
    const m = named.exec(text);
    if (m) bad.push(`${f} names ${m[1]}`);
  }
  return bad;
}

test('no source file imports a higher layer', () => {
  assert.deepEqual(layerViolations(sources()), []);
});

test('the CM and verbs layers name no concrete transport', () => {
  assert.deepEqual(transportMentions(sources()), []);
});

test('the checks catch what they are for: upward imports, a transport reached from verbs or cm', () => {
  const [iw, , nat] = TRANSPORTS;
  const up = new Map([
    ['verbs/x-up.ts', "import { createId } from '../cm/cm-id.js';"],
    [`${iw.dir}/x-up.ts`, "import { RSocket } from '../../rsocket/socket.js';"],
    [`${nat.dir}/x-up.ts`, "import { CmId } from '../cm/cm-id.js';"],
    [`${nat.dir}/x-seam.ts`, "import { registerCmTransport } from '../cm/transport.js';"],
    ['wire/x-up.ts', "import '../verbs/qp.js';"],
    ['cm/x-load.ts', "import { TRANSPORTS } from '../transports.js';"],
  ]);
  assert.deepEqual(layerViolations(up), [
    'verbs/x-up.ts -> cm/cm-id.js',
    `${iw.dir}/x-up.ts -> rsocket/socket.js`,
    `${nat.dir}/x-up.ts -> cm/cm-id.js`,
    'wire/x-up.ts -> verbs/qp.js',
    'wire/x-up.ts -> verbs/qp.js (wire is pure)',
    'cm/x-load.ts -> transports.js (loads transports)',
  ]);
  const named = new Map([...sources()].filter(([f]) => TRANSPORTS.some((t) => f.startsWith(`${t.dir}/`))));
  named.set('cm/x-a.ts', `export const p = () => import('../${nat.dir}/index.js');`);
  const cls = [...named].filter(([f]) => f.startsWith(`${iw.dir}/`)).map(([, text]) => /export class (\w+)/.exec(text)?.[1]).find(Boolean);
  named.set('verbs/x-b.ts', `/** like ${cls} */`);
  assert.deepEqual(transportMentions(named), [`cm/x-a.ts -> ${nat.dir}/index.js (${nat.name})`, `verbs/x-b.ts names ${cls}`]);
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
