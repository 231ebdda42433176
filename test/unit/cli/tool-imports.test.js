// What the tools may import (docs/design/layers.md). No module imports a tool (a `bin` of
// package.json): what two tools share lives in a module of its own (stream-tool.ts, oob.ts,
// common.ts …). Outside src/cli a tool and the tools' shared modules import the package's entry
// modules and the tools' loader (src/cli/rdma.ts, which may reach anything) — and, until the API
// has a face that loads no transport, the modules listed in REACHING below: `rstream -T s` loads
// no transport, and every tool shares c-compat.ts, so none of them can go through an entry module
// that loads every transport.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const SRC = join(ROOT, 'src');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const TOOLS = new Set(Object.values(pkg.bin).map((p) => p.replace(/^dist\//, '').replace(/\.js$/, '.ts')));
const ENTRIES = new Set(['index.ts', 'verbs.ts', 'cm.ts', 'rsocket/index.ts', 'wire/index.ts', 'cli/rdma.ts']);

/** Deeper modules a tool or shared module still imports, and why (see the header). */
const REACHING = {
  // the transport-free API: verbs, CM, errors and errno without loading a transport
  'cli/c-compat.ts': ['verbs/index.ts', 'errors.ts', 'errno.ts'],
  'cli/common.ts': ['cm/index.ts', 'verbs/index.ts', 'errno.ts'],
  'cli/addresses.ts': ['cm/index.ts', 'util/ip.ts'],
  'cli/rstream.ts': ['rsocket/conn.ts', 'rsocket/listener.ts', 'rsocket/options.ts', 'errors.ts', 'errno.ts', 'cm/index.ts', 'verbs/index.ts'],
  'cli/stream-tool.ts': ['rsocket/options.ts', 'errno.ts'],
  'cli/net-sock.ts': ['rsocket/options.ts', 'errno.ts', 'util/poll-waiters.ts'],
  'cli/riostream.ts': ['rsocket/conn.ts', 'rsocket/listener.ts', 'rsocket/state.ts', 'rsocket/options.ts'],
  // shared helpers of util/ the entry modules do not export
  'cli/rping.ts': ['util/copy.ts'],
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

test('outside src/cli the tools import entry modules and the tools\' loader, and only the listed modules beyond', () => {
  const bad = [];
  for (const f of files(join(SRC, 'cli'))) {
    const from = relative(SRC, f);
    if (from === 'cli/rdma.ts') continue;
    for (const to of importsOf(f)) {
      if (to.startsWith('cli/') || ENTRIES.has(to)) continue;
      if (!(REACHING[from] ?? []).includes(to)) bad.push(`${from} -> ${to}`);
    }
  }
  assert.deepEqual(bad, []);
});
