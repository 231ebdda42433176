// What the tools may import (docs/design/layers.md). No module imports a tool (a `bin` of
// package.json): what two tools share lives in a module of its own (stream-tool.ts, oob.ts,
// common.ts …). Outside src/cli a tool and the tools' shared modules import the package's entry
// modules or the tools' faces of it: src/cli/api.ts (verbs, CM, errors, errno: no transport),
// src/cli/rs-api.ts (rsockets, no transport) and the tools' loader src/cli/rdma.ts (api.ts plus the
// transports a run needs). Only the faces reach further, and startup.ts, which every tool imports
// first so that its V8 settings apply before the package loads.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const SRC = join(ROOT, 'src');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const TOOLS = new Set(Object.values(pkg.bin).map((p) => p.replace(/^dist\//, '').replace(/\.js$/, '.ts')));
const ENTRIES = new Set(['index.ts', 'verbs.ts', 'cm.ts', 'rsocket/index.ts', 'wire/index.ts', 'cli/rdma.ts', 'cli/rdma-ud.ts', 'cli/api.ts', 'cli/rs-api.ts']);
/** The tools' faces of the package: they may import any module below the CLI. */
const FACES = new Set(['cli/rdma.ts', 'cli/rdma-ud.ts', 'cli/api.ts', 'cli/rs-api.ts']);

/** The one module beyond the faces a tool module imports, and why (see the header). */
const REACHING = {
  'cli/startup.ts': ['util/env.ts'],
};

function files(dir) {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** The src-relative .ts paths `file` imports (value or type, static or dynamic). */
function importsOf(file) {
  const text = readFileSync(file, 'utf8');
  const out = [];
  for (const m of text.matchAll(/(?:import|export)[^'";]*?from\s+'(\.[^']+)'|import\s*\(?\s*'(\.[^']+)'/g)) {
    out.push(relative(SRC, resolve(dirname(file), m[1] ?? m[2])).replace(/\.js$/, '.ts'));
  }
  return out;
}

test('no module imports a tool', () => {
  const bad = [];
  for (const f of files(SRC)) for (const to of importsOf(f)) if (TOOLS.has(to)) bad.push(`${relative(SRC, f)} -> ${to}`);
  assert.deepEqual(bad, []);
});

test('outside src/cli the tools import entry modules and the tools\' faces of the package, and nothing beyond', () => {
  const bad = [];
  for (const f of files(join(SRC, 'cli'))) {
    const from = relative(SRC, f);
    if (FACES.has(from)) continue;
    for (const to of importsOf(f)) {
      if (to.startsWith('cli/') || ENTRIES.has(to)) continue;
      if (!(REACHING[from] ?? []).includes(to)) bad.push(`${from} -> ${to}`);
    }
  }
  assert.deepEqual(bad, []);
});
