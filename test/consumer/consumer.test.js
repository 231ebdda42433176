// The package as a consumer gets it: `npm pack` of the built tree (no network, no scripts), a
// tarball with the package and nothing else, installed offline into a fresh project, and a
// program that imports the root and every subpath export compiled under --strict with module
// node16, with moduleResolution bundler, with isolatedModules + verbatimModuleSyntax, and with the
// older node10 resolution (which reads `typesVersions`), then
// run against the soft iWARP device (its `using` scopes destroy what they made); the README's
// first program compiled the same three ways and run from the installed package.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const FIXTURE = join(ROOT, 'test/consumer/fixture');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
/** npm without the registry, the audit, update notices, or install scripts run by older npms' defaults. */
const NPM_ENV = { ...process.env, npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false', RDMACM_NATIVE_BUILD: '0' };

let work;
let tarball;
let packed;
let project;

/** Run a command to completion (asynchronously: several compiles share the machine). */
function run(cmd, args, opts) {
  return new Promise((done) => {
    const c = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    c.stdout.on('data', (b) => (stdout += b));
    c.stderr.on('data', (b) => (stderr += b));
    const timer = setTimeout(() => c.kill('SIGKILL'), opts.timeout ?? 60_000);
    c.on('close', (status, signal) => {
      clearTimeout(timer);
      done({ status, signal, stdout, stderr });
    });
  });
}

const show = (r) => `exit ${r.status} signal ${r.signal}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;

/** The first TypeScript block of the README that imports the package: its first program. */
function readmeProgram(readme) {
  for (const m of readme.matchAll(/```ts[^\n]*\n([\s\S]*?)```/g)) if (/from 'rdmacm(\/\w+)?'/.test(m[1])) return m[1];
  return null;
}

before(async () => {
  assert.ok(existsSync(join(ROOT, pkg.exports['.'].default)), 'the package is built (npm run build)');
  work = mkdtempSync(join(tmpdir(), 'rdmacm-consumer-'));
  const r = spawnSync('npm', ['pack', '--ignore-scripts', '--offline', '--json', '--pack-destination', work], { cwd: ROOT, encoding: 'utf8', env: NPM_ENV, timeout: 60_000 });
  assert.equal(r.status, 0, show(r));
  const [info] = JSON.parse(r.stdout);
  tarball = join(work, info.filename);
  packed = info.files.map((f) => f.path);
  project = join(work, 'project');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'rdmacm-consumer', private: true, type: 'module' }, null, 2));
  const i = await run('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: project, env: NPM_ENV, timeout: 90_000 });
  assert.equal(i.status, 0, show(i));
  for (const f of readdirSync(FIXTURE)) copyFileSync(join(FIXTURE, f), join(project, f));
  const program = readmeProgram(readFileSync(join(project, 'node_modules/rdmacm/README.md'), 'utf8'));
  assert.ok(program, 'the README has a program that imports rdmacm');
  writeFileSync(join(project, 'readme.ts'), program);
  // @types/node from this repository (the consumer's own would come from the registry). One
  // build also checks the shipped .d.ts files themselves (skipLibCheck off).
  const base = { strict: true, target: 'ES2022', lib: ['ES2022'], types: ['node'], typeRoots: [join(ROOT, 'node_modules/@types')], skipLibCheck: true };
  const configs = {
    node16: { ...base, module: 'node16', moduleResolution: 'node16', outDir: 'out' },
    bundler: { ...base, module: 'preserve', moduleResolution: 'bundler', noEmit: true },
    isolated: { ...base, module: 'nodenext', moduleResolution: 'nodenext', isolatedModules: true, verbatimModuleSyntax: true, noEmit: true, skipLibCheck: false },
    // The older resolution, which reads `typesVersions` instead of `exports`.
    node10: { ...base, module: 'esnext', moduleResolution: 'node10', noEmit: true },
  };
  for (const [name, compilerOptions] of Object.entries(configs)) {
    writeFileSync(join(project, `tsconfig.${name}.json`), JSON.stringify({ compilerOptions, files: ['consumer.ts', 'readme.ts'] }, null, 2));
  }
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

test('the tarball holds the package and nothing else', () => {
  const allowed = /^(package\.json|README\.md|LICENSE|CHANGELOG\.md|native\/build\.mjs|native\/src\/[\w.-]+\.[ch]|docs\/.+\.md|src\/.+\.ts|dist\/.+\.(js|d\.ts|js\.map|d\.ts\.map))$/;
  assert.deepEqual(packed.filter((f) => !allowed.test(f)), [], 'files outside the package layout');
  // Every build output has its source (nothing stale from an older build), every source ships.
  const stale = packed.filter((f) => f.startsWith('dist/') && !packed.includes(f.replace(/^dist\//, 'src/').replace(/\.(js|d\.ts)(\.map)?$/, '.ts')));
  assert.deepEqual(stale, [], 'build output without a source: rebuild from an empty dist (npm run build)');
  const sources = (dir) => readdirSync(dir).flatMap((f) => (statSync(join(dir, f)).isDirectory() ? sources(join(dir, f)) : f.endsWith('.ts') ? [relative(ROOT, join(dir, f))] : []));
  assert.deepEqual(sources(join(ROOT, 'src')).filter((f) => !packed.includes(f)), [], 'sources not shipped');
  for (const [sub, t] of Object.entries(pkg.exports)) {
    for (const f of [t.types, `${t.types}.map`, t.default]) assert.ok(packed.includes(f.replace(/^\.\//, '')), `${sub}: ${f}`);
  }
  for (const [name, f] of Object.entries(pkg.bin)) assert.ok(packed.includes(f), `bin ${name}: ${f}`);
});

test('go to definition: every declaration map of the installed package leads into its own src/', () => {
  const installed = join(project, 'node_modules/rdmacm');
  const maps = packed.filter((f) => f.endsWith('.d.ts.map'));
  assert.equal(maps.length, packed.filter((f) => f.endsWith('.d.ts')).length, 'a map beside every .d.ts');
  const bad = [];
  for (const m of maps) {
    const at = join(installed, m);
    for (const s of JSON.parse(readFileSync(at, 'utf8')).sources) {
      const target = resolve(dirname(at), s);
      if (!relative(installed, target).startsWith('src/') || !existsSync(target)) bad.push(`${m} -> ${s}`);
    }
  }
  assert.deepEqual(bad, []);
});

test('a consumer program compiles under --strict: node16, bundler, isolatedModules + verbatimModuleSyntax, node10', { timeout: 180_000 }, async () => {
  const results = await Promise.all(['node16', 'bundler', 'isolated', 'node10'].map(async (name) => [name, await run(process.execPath, [TSC, '-p', `tsconfig.${name}.json`, '--pretty', 'false'], { cwd: project, timeout: 170_000 })]));
  const failed = results.filter(([, r]) => r.status !== 0).map(([name, r]) => `${name}: ${show(r)}`);
  assert.deepEqual(failed, []);
});

test('the compiled consumer runs on the soft iWARP device; its using scopes destroy what they made', { timeout: 60_000 }, async () => {
  assert.ok(existsSync(join(project, 'out/consumer.js')), 'compiled by the node16 build');
  const r = await run(process.execPath, ['out/consumer.js'], { cwd: project, timeout: 50_000 });
  assert.equal(r.status, 0, show(r));
  assert.deepEqual(r.stdout.trim().split('\n'), [
    'entry points: rdmacm=1 verbs=1 cm=1 rsocket=1 wire=1 http=1',
    'using: channel destroyed true, cq destroyed true, pd deallocated true, mr registered false',
    'dispose with a live MR: EBUSY errno EBUSY (ibv_dealloc_pd)',
    'detached: EFAULT',
    'abort shape: ABORT_ERR',
  ], show(r));
});

test("the README's first program runs from the installed package", { timeout: 60_000 }, async () => {
  const r = await run(process.execPath, ['out/readme.js'], { cwd: project, timeout: 50_000 });
  assert.equal(r.signal, null, show(r));
  assert.equal(r.status, 0, show(r));
  assert.equal(r.stderr, '', show(r));
  assert.notEqual(r.stdout.trim(), '', show(r));
});
