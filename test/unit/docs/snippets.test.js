// The code of the README and of docs/ that says it works does: a fenced block whose info string is
// `ts run` or `js run` is a whole program, `ts check` a whole module that needs a peer or a device
// the test machine may not have. Every `ts` one is type-checked with the package's own strict
// settings against the typings the package ships (dist/*.d.ts, imported as 'rdmacm'); every `run`
// one is run as an ES module from a scratch project that has the package in its node_modules,
// over the soft devices, and must exit 0 by itself within its time limit. A `run` block followed
// by a block marked `text output` must print exactly that.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const RUN_MS = 30_000;

/** The Markdown files whose blocks are checked: the README, the changelog, docs/ (not the generated API pages). */
function markdownFiles() {
  const out = ['README.md', 'CHANGELOG.md'];
  const walk = (dir) => {
    for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      const rel = `${dir}/${e.name}`;
      if (e.isDirectory() && rel !== 'docs/api') walk(rel);
      else if (e.isFile() && e.name.endsWith('.md')) out.push(rel);
    }
  };
  walk('docs');
  return out;
}

/** The marked blocks: `{ where, lang: 'ts'|'js', mode: 'run'|'check', code, output? }`. */
function markedBlocks() {
  const blocks = [];
  for (const file of markdownFiles()) {
    let text;
    try {
      text = readFileSync(join(ROOT, file), 'utf8');
    } catch {
      continue;
    }
    const lines = text.split('\n');
    for (let i = 0; i < lines.length; i++) {
      const m = /^```(ts|js|typescript|javascript)\s+(run|check)\s*$/.exec(lines[i]);
      if (!m) continue;
      const start = i + 1;
      let end = start;
      while (end < lines.length && !lines[end].startsWith('```')) end++;
      const lang = m[1].startsWith('t') ? 'ts' : 'js';
      const block = { where: `${file}:${i + 1}`, lang, mode: m[2], code: lines.slice(start, end).join('\n') };
      let next = end + 1;
      while (next < lines.length && lines[next].trim() === '') next++;
      if (lines[next] === '```text output') {
        let stop = next + 1;
        while (stop < lines.length && !lines[stop].startsWith('```')) stop++;
        block.output = `${lines.slice(next + 1, stop).join('\n')}\n`;
        end = stop;
      }
      blocks.push(block);
      i = end;
    }
  }
  return blocks;
}

const blocks = markedBlocks();

test('the README\'s first program and its API example are marked to run', () => {
  const readme = blocks.filter((b) => b.where.startsWith('README.md:') && b.mode === 'run');
  assert.ok(readme.length >= 2, `README run blocks: ${readme.map((b) => b.where).join(', ')}`);
  assert.ok(blocks.every((b) => b.lang === 'ts' || b.mode === 'run'), 'a js block can only be run');
});

test('every marked TypeScript block type-checks against the shipped typings', () => {
  const cfg = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(cfg.config, ts.sys, ROOT);
  Object.assign(options, { noEmit: true, rootDir: ROOT, declaration: false, declarationMap: false, sourceMap: false });
  // Files inside the package (never written), so that 'rdmacm' resolves to the package itself
  // through its `exports`, to the .d.ts files of dist/ — what a user's compiler sees.
  const virtual = new Map();
  blocks.filter((b) => b.lang === 'ts').forEach((b, n) => virtual.set(join(ROOT, 'test', 'unit', 'docs', `snippet-${n}.mts`), b));
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang, ...rest) => (virtual.has(name) ? ts.createSourceFile(name, virtual.get(name).code, lang) : getSourceFile(name, lang, ...rest));
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => virtual.has(name) || fileExists(name);
  const program = ts.createProgram([...virtual.keys()], options, host);
  const problems = ts.getPreEmitDiagnostics(program).filter((d) => !d.file || virtual.has(d.file.fileName)).map((d) => {
    const msg = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    if (!d.file) return msg;
    const { line } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
    const b = virtual.get(d.file.fileName);
    const [file, at] = b.where.split(':');
    return `${file}:${Number(at) + 1 + line}: ${msg}`;
  });
  assert.deepEqual(problems, []);
});

const runnable = blocks.filter((b) => b.mode === 'run');
const scratch = mkdtempSync(join(tmpdir(), 'rdmacm-snippets-'));
mkdirSync(join(scratch, 'node_modules'));
symlinkSync(ROOT, join(scratch, 'node_modules', 'rdmacm'), 'dir');
process.on('exit', () => rmSync(scratch, { recursive: true, force: true }));

for (const [n, b] of runnable.entries()) {
  test(`${b.where} runs to completion`, () => {
    const js = b.lang === 'ts' ? ts.transpileModule(b.code, { compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 } }).outputText : b.code;
    const file = join(scratch, `snippet-${n}.mjs`);
    writeFileSync(file, js);
    const r = spawnSync(process.execPath, [file], { cwd: scratch, encoding: 'utf8', timeout: RUN_MS });
    const what = `${relative(ROOT, file)} (${b.where}): exit ${r.status} signal ${r.signal}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
    assert.equal(r.signal, null, what);
    assert.equal(r.status, 0, what);
    if (b.output !== undefined) assert.equal(r.stdout, b.output, what);
  });
}
