// The README's API example is a program: it is type-checked with the package's own compiler
// settings (against the published typings, imported as 'rdmacm') and run, and must print what it
// says. An example that hangs, throws or no longer compiles fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { spawnSync } from 'node:child_process';
import ts from 'typescript';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/** The TypeScript block of the README's "The API" section. */
function apiExample() {
  const md = readFileSync(join(REPO, 'README.md'), 'utf8');
  const section = md.slice(md.indexOf('\n## The API'));
  const m = /```ts[^\n]*\n([\s\S]*?)```/.exec(section);
  assert.ok(m, 'README has a ts block under "## The API"');
  return m[1];
}

test('the README API example type-checks under the package\'s strict settings', () => {
  const code = apiExample();
  const cfg = ts.readConfigFile(join(REPO, 'tsconfig.json'), ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(cfg.config, ts.sys, REPO);
  Object.assign(options, { noEmit: true, rootDir: REPO, declaration: false, declarationMap: false, sourceMap: false });
  // A file inside the package (never written): 'rdmacm' resolves to the package itself, as for a user.
  const file = join(REPO, 'test', 'unit', 'docs', 'readme-example.mts');
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang, ...rest) => (name === file ? ts.createSourceFile(name, code, lang) : getSourceFile(name, lang, ...rest));
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => name === file || fileExists(name);
  const program = ts.createProgram([file], options, host);
  const diags = ts.getPreEmitDiagnostics(program).filter((d) => d.file?.fileName === file || !d.file);
  const text = diags.map((d) => {
    const msg = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    if (!d.file) return msg;
    const { line } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
    return `line ${line + 1}: ${msg}`;
  });
  assert.deepEqual(text, []);
});

test('the README API example runs to completion and prints what it received', () => {
  const js = ts.transpileModule(apiExample(), { compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 } }).outputText;
  const dist = pathToFileURL(join(REPO, 'dist', 'index.js')).href;
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-readme-'));
  try {
    const f = join(dir, 'example.mjs');
    writeFileSync(f, js.replace(/from 'rdmacm'/g, `from '${dist}'`));
    const r = spawnSync(process.execPath, [f], { encoding: 'utf8', timeout: 20_000 });
    const what = `exit ${r.status} signal ${r.signal}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
    assert.equal(r.signal, null, what);
    assert.equal(r.status, 0, what);
    // The two sides print in either order.
    assert.deepEqual(r.stdout.split('\n').sort(), ['', 'client send wr 1: ok', 'server got wr 7: "hello"'], what);
    assert.equal(r.stderr, '', what);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
