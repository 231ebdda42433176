// docs/http.md's example is a program: type-checked with the package's compiler settings (against
// the published typings, imported as 'rdmacm/http', and undici's own), and run, printing what the
// page says. Beside it, the hooks' types against the clients they plug into: every way the page
// says to pass them must compile, under exactOptionalPropertyTypes too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { spawnSync } from 'node:child_process';
import ts from 'typescript';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/** The first TypeScript block of docs/http.md. */
function example() {
  const m = /```ts\n([\s\S]*?)```/.exec(readFileSync(join(REPO, 'docs', 'http.md'), 'utf8'));
  assert.ok(m, 'docs/http.md has a ts block');
  return m[1];
}

/** The hooks passed every way docs/http.md names. */
const USES = `
import http from 'node:http';
import https from 'node:https';
import http2 from 'node:http2';
import tls from 'node:tls';
import { Agent, Client, Pool, fetch } from 'undici';
import { createHttpServer, createHttp2Server, serve, createHttpConnection, RAgent, RHttpsAgent, rsConnector, buildConnector } from 'rdmacm/http';
const s: http.Server = createHttpServer({ keepAliveTimeout: 1000, rsocket: { sendBufferSize: 1 << 20 } }, (req, res) => res.end());
const h2: http2.Http2Server = createHttp2Server((req, res) => res.end());
const tlsServer: https.Server = serve(https.createServer({}), { receiveBufferSize: 1 << 20 });
http.request({ host: '127.0.0.1', port: 1, createConnection: createHttpConnection });
http.request({ host: '127.0.0.1', port: 1, createConnection: (o) => tls.connect({ socket: createHttpConnection(o), servername: 'localhost' }) });
http.get('http://127.0.0.1:1/', { agent: new RAgent({ keepAlive: true, maxSockets: 4, rsocket: { sqSize: 128 } }) });
http2.connect('http://127.0.0.1:1', { createConnection: createHttpConnection });
https.get('https://127.0.0.1:1/', { agent: new RHttpsAgent({ ca: 'pem', keepAlive: true, rsocket: { inlineSize: 64 } }) });
const tlsConnector = new Agent({ connect: buildConnector({ tls: { ca: 'pem', rejectUnauthorized: true } }) });
const a = new Agent({ connect: rsConnector });
const c = new Client('http://127.0.0.1:1', { connect: buildConnector({ timeout: 5000, sendBufferSize: 1 << 20 }), pipelining: 4 });
const p = new Pool('http://127.0.0.1:1', { connect: rsConnector });
void fetch('http://127.0.0.1:1/', { dispatcher: a });
void [s, h2, tlsServer, c, p, tlsConnector];
`;

/** Type errors of `code` as a module inside the package (so 'rdmacm/http' is the package itself). */
function typeErrors(code, name, extra = {}) {
  const cfg = ts.readConfigFile(join(REPO, 'tsconfig.json'), ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(cfg.config, ts.sys, REPO);
  Object.assign(options, { noEmit: true, rootDir: REPO, declaration: false, declarationMap: false, sourceMap: false, ...extra });
  const file = join(REPO, 'test', 'unit', 'docs', name);
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (n, lang, ...rest) => (n === file ? ts.createSourceFile(n, code, lang) : getSourceFile(n, lang, ...rest));
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (n) => n === file || fileExists(n);
  const program = ts.createProgram([file], options, host);
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file?.fileName === file || !d.file)
    .map((d) => {
      const msg = ts.flattenDiagnosticMessageText(d.messageText, '\n');
      if (!d.file) return msg;
      const { line } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
      return `line ${line + 1}: ${msg}`;
    });
}

test("docs/http.md's example type-checks under the package's strict settings", () => {
  assert.deepEqual(typeErrors(example(), 'http-example.mts'), []);
});

test('the hooks fit node:http, https, http2 and undici where docs/http.md passes them (strict, with and without exactOptionalPropertyTypes)', () => {
  assert.deepEqual(typeErrors(USES, 'http-uses.mts'), []);
  assert.deepEqual(typeErrors(USES, 'http-uses-loose.mts', { exactOptionalPropertyTypes: false }), []);
});

test("docs/http.md's example runs to completion and prints what the page says", () => {
  const js = ts.transpileModule(example(), { compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 } }).outputText;
  const entry = pathToFileURL(join(REPO, 'dist', 'http', 'index.js')).href;
  const undici = pathToFileURL(createRequire(import.meta.url).resolve('undici')).href;
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-http-doc-'));
  try {
    const f = join(dir, 'example.mjs');
    writeFileSync(f, js.replace(/from 'rdmacm\/http'/g, `from '${entry}'`).replace(/from 'undici'/g, `from '${undici}'`));
    const r = spawnSync(process.execPath, [f], { encoding: 'utf8', timeout: 30_000 });
    const what = `exit ${r.status} signal ${r.signal}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
    assert.equal(r.signal, null, what);
    assert.equal(r.status, 0, what);
    assert.equal(r.stdout, 'hello over RDMA, node:http\nhello over RDMA, undici\n', what);
    assert.equal(r.stderr, '', what);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
