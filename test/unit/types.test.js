// The typings a TypeScript consumer gets (dist/**/*.d.ts, reached through package.json's
// `exports`): the type tests in test/types/ compile against them (every `// @ts-expect-error`
// there must still be an error), every exported name has one declaration (one interface, one
// type, one class, one enum, one constant — a constant and a type of the same name, or the
// overloads of one function, are one declaration), a name exported by several entry points is
// the same declaration in each, and no enum is a `const enum` (consumers built with
// isolatedModules or verbatimModuleSyntax cannot use those: TS2748), with declaration maps that
// lead into the shipped src/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const ENTRIES = Object.entries(pkg.exports).map(([sub, t]) => [sub, join(ROOT, t.types)]);

function dtsFiles(dir) {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? dtsFiles(p) : p.endsWith('.d.ts') ? [p] : [];
  });
}

test('test/types compiles against the package typings; every @ts-expect-error is still an error', { timeout: 120_000 }, () => {
  const r = spawnSync(process.execPath, [TSC, '-p', join(ROOT, 'test/types/tsconfig.json'), '--pretty', 'false'], { encoding: 'utf8', timeout: 110_000 });
  assert.equal(r.error, undefined, String(r.error));
  assert.equal(r.status, 0, `tsc over test/types:\n${r.stdout}${r.stderr}`);
  const files = readdirSync(join(ROOT, 'test/types')).filter((f) => f.endsWith('.ts'));
  assert.ok(files.length >= 2, `type test files: ${files.join(' ')}`);
});

test('each exported name has one declaration, the same through every entry point', () => {
  const program = ts.createProgram(ENTRIES.map(([, f]) => f), {
    strict: true,
    types: ['node'],
    skipLibCheck: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    noEmit: true,
  });
  const checker = program.getTypeChecker();
  const rel = (d) => relative(ROOT, d.getSourceFile().fileName);
  const problems = [];
  /** name → the declaration set it resolves to, first seen through which entry. */
  const seen = new Map();
  /** The .d.ts files that declare something an entry point exports. */
  const publicFiles = new Set();
  let count = 0;
  for (const [sub, file] of ENTRIES) {
    const sf = program.getSourceFile(file);
    assert.ok(sf, `${sub}: ${file} not in the program`);
    const mod = checker.getSymbolAtLocation(sf);
    for (const ex of checker.getExportsOfModule(mod)) {
      count++;
      const s = ex.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(ex) : ex;
      const decls = s.declarations ?? [];
      const files = new Set(decls.map(rel));
      const perKind = new Map();
      for (const d of decls) {
        // Overloads of one function are one declaration; so are the parts of one merged
        // namespace. A value and a type of the same name are two kinds.
        const k = ts.isFunctionDeclaration(d) ? 'function' : ts.isModuleDeclaration(d) ? 'namespace' : ts.SyntaxKind[d.kind];
        perKind.set(k, (perKind.get(k) ?? 0) + (k === 'function' || k === 'namespace' ? 0 : 1));
      }
      const twice = [...perKind].filter(([, n]) => n > 1).map(([k]) => k);
      if (files.size > 1 || twice.length > 0) problems.push(`${sub} ${ex.name}: declared ${decls.length} times (${[...files].join(', ')})`);
      for (const f of files) publicFiles.add(f);
      // `export * as iwarp` namespaces are named by their entry point: the root's `iwarp` (the
      // device's settings) is not the wire's `iwarp` (its codecs).
      if (s.flags & ts.SymbolFlags.ValueModule) continue;
      const key = decls.map((d) => `${rel(d)}:${d.pos}`).sort().join('|');
      const prev = seen.get(ex.name);
      if (prev === undefined) seen.set(ex.name, { key, sub });
      else if (prev.key !== key) problems.push(`${ex.name}: ${prev.sub} and ${sub} export different declarations`);
    }
  }
  assert.ok(count > 100, `${count} exports`);
  // And across the public .d.ts files: no second declaration of an exported name in another
  // module (a copy that some signature uses instead of the exported one).
  const where = new Map();
  for (const f of [...publicFiles].map((p) => join(ROOT, p))) {
    const sf = ts.createSourceFile(f, readFileSync(f, 'utf8'), ts.ScriptTarget.ES2022, true);
    const visit = (node) => {
      const named = ts.isInterfaceDeclaration(node) || ts.isTypeAliasDeclaration(node) || ts.isClassDeclaration(node) || ts.isEnumDeclaration(node) || ts.isFunctionDeclaration(node) || ts.isVariableDeclaration(node);
      if (named && node.name && ts.isIdentifier(node.name) && seen.has(node.name.text)) {
        const k = node.name.text;
        if (!where.has(k)) where.set(k, new Set());
        where.get(k).add(relative(ROOT, f));
      }
      if (ts.isSourceFile(node) || ts.isVariableStatement(node) || ts.isVariableDeclarationList(node)) ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  for (const [name, files] of where) if (files.size > 1) problems.push(`${name}: declared in ${[...files].join(' and ')}`);
  assert.deepEqual(problems, []);
});

test('no const enum in the shipped typings (TS2748 under isolatedModules)', () => {
  const bad = [];
  for (const f of dtsFiles(join(ROOT, 'dist'))) {
    const text = readFileSync(f, 'utf8');
    for (const m of text.matchAll(/\bconst\s+enum\s+(\w+)/g)) bad.push(`${relative(ROOT, f)}: ${m[1]}`);
  }
  assert.deepEqual(bad, []);
});

test('declaration maps lead from each entry point into the shipped src/', () => {
  assert.ok(pkg.files.includes('src'), 'src is shipped');
  for (const [sub, file] of ENTRIES) {
    const map = `${file}.map`;
    assert.ok(existsSync(map), `${sub}: no ${relative(ROOT, map)}`);
    const { sources } = JSON.parse(readFileSync(map, 'utf8'));
    for (const s of sources) {
      const target = resolve(dirname(map), s);
      assert.ok(relative(ROOT, target).startsWith('src/') && existsSync(target), `${sub}: ${s} -> ${relative(ROOT, target)}`);
    }
  }
});
