// The documents the npm package ships (package.json `files`, as `npm pack` lists them) send their
// readers only to files the package ships too: a relative link must resolve inside the package,
// and a path of the repository (bench/…, test/…, scripts/…, .ci/run, a contributor document) that
// the package leaves out must not be named — a user who installed the package does not have it.
// Repository-only pages are linked by their address in the repository instead. The API reference
// (docs/api/) is generated before publishing (npm run docs, prepublishOnly), so links into it count as shipped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, resolve, dirname, relative, posix } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
/** Made outside git: the API reference (before publishing), the native addons (at install), dist/ (prepare). */
const GENERATED = ['docs/api/', 'native/build/', 'dist/'];
const generated = (p) => GENERATED.some((g) => p.startsWith(g) || p === g.slice(0, -1));

/** The files `npm pack` puts in the package (without running the package's scripts). */
function packedFiles() {
  const r = spawnSync('npm', ['pack', '--dry-run', '--ignore-scripts', '--json'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  return new Set(JSON.parse(r.stdout)[0].files.map((f) => f.path));
}

const packed = packedFiles();
const dirs = new Set();
for (const f of packed) for (let d = posix.dirname(f); d !== '.'; d = posix.dirname(d)) dirs.add(d);
const shipped = (p) => generated(p) || packed.has(p) || dirs.has(p.replace(/\/$/, ''));
const docs = [...packed].filter((f) => f.endsWith('.md') && !f.startsWith('src/') && !generated(f)).sort();

/** Where a path written in `doc` points, relative to the package root (null: outside it). */
function target(doc, p) {
  const abs = resolve(ROOT, p.startsWith('.') ? dirname(doc) : '', p);
  const rel = relative(ROOT, abs).split('\\').join('/');
  return rel.startsWith('..') ? null : rel;
}

/** A shipped document's lines. */
function lines(doc) {
  return readFileSync(join(ROOT, doc), 'utf8').split('\n');
}

test('the package ships user documents and leaves the repository\'s contributor ones out', () => {
  for (const must of ['README.md', 'LICENSE', 'CHANGELOG.md', 'docs/errors.md', 'docs/native.md', 'docs/man/rping.1.md']) assert.ok(packed.has(must), must);
  for (const mustNot of ['docs/interop.md', 'docs/bench.md', 'docs/design/layers.md', 'bench/index.js', 'test/unit/docs/shipped-docs.test.js', '.ci/run', 'scripts/demo.js']) {
    assert.ok(!packed.has(mustNot), mustNot);
  }
});

test('relative links in shipped documents resolve to shipped files', () => {
  const bad = [];
  for (const doc of docs) {
    lines(doc).forEach((line, i) => {
      for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
        const href = m[1];
        if (/^[a-z]+:/i.test(href) || href.startsWith('#')) continue;
        const path = href.split('#')[0];
        const t = target(doc, path.startsWith('.') ? path : `./${path}`);
        if (t === null || !shipped(t)) bad.push(`${doc}:${i + 1}: ${href}`);
      }
    });
  }
  assert.deepEqual(bad, []);
});

test('shipped documents name no file of the repository that the package leaves out', () => {
  const bad = [];
  // A path-like word: segments joined by '/', not part of a URL or an absolute path.
  const PATH = /(?<![\w/.:@-])((?:\.{1,2}\/)*\.?[\w-][\w.-]*(?:\/[\w.*-]+)+\/?)/g;
  for (const doc of docs) {
    lines(doc).forEach((line, i) => {
      // A link to the repository's page names the path as its text: that is where it sends the reader.
      const text = line.replace(/\[[^\]]*\]\(https?:[^)]*\)/g, '').replace(/\]\([^)]*\)/g, ']').replace(/https?:\/\/\S+/g, '');
      for (const m of text.matchAll(PATH)) {
        const word = m[1].replace(/[.,;:]+$/, '');
        const glob = word.indexOf('*');
        const p = glob >= 0 ? posix.dirname(word.slice(0, glob + 1)) : word;
        // Relative to the document when it says so, else to the package root (how the docs write paths).
        const t = p.startsWith('.') ? target(doc, p) : target('README.md', p);
        if (t === null) {
          if (p.startsWith('..')) bad.push(`${doc}:${i + 1}: ${word} (outside the package)`);
          continue;
        }
        if (!existsSync(join(ROOT, t))) continue; // not a path of this repository (a C file of rdma-core, a URL path)
        if (statSync(join(ROOT, t)).isDirectory() ? !dirs.has(t.replace(/\/$/, '')) && !generated(t) : !shipped(t)) {
          bad.push(`${doc}:${i + 1}: ${word}`);
        }
      }
    });
  }
  assert.deepEqual(bad, []);
});

test('package.json says where the package lives, and repository links in the docs go there', () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const repo = /^git\+(https:\/\/github\.com\/[\w.-]+\/[\w.-]+)\.git$/.exec(pkg.repository?.url ?? '');
  assert.ok(repo, `repository.url: ${pkg.repository?.url}`);
  assert.ok(pkg.homepage.startsWith(repo[1]) && pkg.bugs.url.startsWith(repo[1]));
  assert.ok(Array.isArray(pkg.keywords) && pkg.keywords.includes('rdma'));
  const elsewhere = [];
  for (const doc of docs) {
    lines(doc).forEach((line, i) => {
      for (const m of line.matchAll(/https:\/\/github\.com\/([\w.-]+\/[\w.-]+)\/(?:blob|tree)\/[^)\s]+/g)) {
        const [owner, name] = m[1].split('/');
        if (name === repo[1].split('/').pop() && `https://github.com/${m[1]}` !== repo[1]) elsewhere.push(`${doc}:${i + 1}: ${m[0]}`);
      }
    });
  }
  assert.deepEqual(elsewhere, []);
});
