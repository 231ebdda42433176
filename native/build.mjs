#!/usr/bin/env node
// Builds the optional native addons with the system C compiler and no download. Run by
// `npm install` (the package's `install` script) and by `npm run build:native`.
//  - native/build/netopt.node: the socket calls the soft devices need — the soft RoCE device's
//    options to speak to a kernel rxe (IPv4 identification 0, IPv6 UDP checksum 0 accepted), and
//    the unsent bytes the soft iWARP device's graceful close waits on (native/src/netopt.c);
//    needs only Node's headers.
//  - native/build/rdmacm.node: the native backend over rdma-core's libibverbs and librdmacm.
//
// It never fails the install: where the compiler, Node's headers or rdma-core's headers
// (`apt install libibverbs-dev librdmacm-dev`) are missing it prints one line saying so and
// exits 0; the package then runs on its soft devices only (and without netopt.node, the soft
// RoCE device talks to our own processes but not to a kernel rxe over IPv4).
//
// Environment: CC (compiler, default `cc`), RDMACM_NATIVE_BUILD=0 (skip), npm_config_nodedir /
// NODEDIR (where Node's include/node is), RDMACM_NATIVE_VERBOSE=1 (print the compiler output),
// RDMACM_NATIVE_OUT (the file to write instead of native/build/rdmacm.node; netopt.node goes
// beside it).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { homedir } from 'node:os';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const OUT = process.env.RDMACM_NATIVE_OUT ? resolve(process.env.RDMACM_NATIVE_OUT) : join(HERE, 'build', 'rdmacm.node');
const SOURCES = ['addon.c', 'verbs.c', 'cm.c', 'srq.c', 'mw.c'].map((f) => join(HERE, 'src', f));
const verbose = process.env.RDMACM_NATIVE_VERBOSE === '1';

function note(msg, what = 'native addon') {
  process.stdout.write(`rdmacm: ${what} ${msg}\n`);
}

/** Compile `sources` into the addon `out`; returns the compiler's output on failure, else null. */
function compile(cc, inc, sources, out, libs) {
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  const args = [
    '-shared', '-fPIC', '-O2', '-std=gnu11', '-Wall', '-Wextra', '-Wno-unused-parameter', '-Wno-missing-field-initializers',
    '-fvisibility=hidden', '-DNODE_GYP_MODULE_NAME=rdmacm', `-I${inc}`,
    ...sources, '-o', tmp, ...libs,
  ];
  const r = spawnSync(cc, args, { encoding: 'utf8' });
  const text = `${r.stdout ?? ''}${r.stderr ?? ''}`;
  if (r.error || r.status !== 0) {
    rmSync(tmp, { force: true });
    return text || String(r.error);
  }
  if (verbose && text.trim()) process.stdout.write(text);
  renameSync(tmp, out);
  return null;
}

/** The soft RoCE device's socket option addon (Node's headers only). */
function buildNetopt(cc, inc) {
  const out = join(dirname(OUT), 'netopt.node');
  const failed = compile(cc, inc, [join(HERE, 'src', 'netopt.c')], out, []);
  if (failed !== null) {
    note('not built (compile failed); the soft RoCE device cannot reach a kernel rxe over IPv4, and an iWARP close does not wait for its last data to be sent before the FIN', 'netopt addon');
    if (verbose) process.stdout.write(failed);
  }
}

/** Directories that may hold Node's headers (node_api.h, uv.h). */
function nodeIncludeDirs() {
  const dirs = [];
  for (const d of [process.env.npm_config_nodedir, process.env.NODEDIR]) if (d) dirs.push(join(d, 'include', 'node'));
  // An official Node build: <prefix>/bin/node and <prefix>/include/node.
  dirs.push(resolve(dirname(process.execPath), '..', 'include', 'node'));
  dirs.push('/usr/include/node', '/usr/local/include/node');
  // Headers node-gyp fetched earlier for this version (never fetched here).
  const v = process.versions.node;
  dirs.push(join(homedir(), '.cache', 'node-gyp', v, 'include', 'node'));
  dirs.push(join(homedir(), '.node-gyp', v, 'include', 'node'));
  return dirs;
}

function main() {
  if (process.env.RDMACM_NATIVE_BUILD === '0') {
    note('not built (RDMACM_NATIVE_BUILD=0); the soft devices work as ever');
    return;
  }
  if (process.platform !== 'linux') {
    note(`not built (${process.platform}: rdma-core is Linux only); the soft devices work as ever`);
    return;
  }
  const inc = nodeIncludeDirs().find((d) => existsSync(join(d, 'node_api.h')) && existsSync(join(d, 'uv.h')));
  if (!inc) {
    note("not built (Node's headers not found: set npm_config_nodedir); the soft devices work as ever");
    return;
  }
  const cc = process.env.CC || 'cc';
  const probe = spawnSync(cc, ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    note(`not built (no C compiler '${cc}'); the soft devices work as ever`);
    return;
  }
  buildNetopt(cc, inc);
  const out = compile(cc, inc, SOURCES, OUT, ['-libverbs', '-lrdmacm']);
  if (out !== null) {
    let why = 'compile failed';
    if (/infiniband\/verbs\.h|rdma\/rdma_cma\.h/.test(out) && /No such file/.test(out)) why = "rdma-core's headers not found (apt install libibverbs-dev librdmacm-dev)";
    else if (/cannot find -l(ibverbs|rdmacm)/.test(out)) why = "rdma-core's libraries not found (apt install libibverbs-dev librdmacm-dev)";
    note(`not built (${why}); the soft devices work as ever`);
    if (verbose) process.stdout.write(out);
    return;
  }
  note(`built: ${OUT} (check with: npx rdmacm-devices)`);
}

try {
  main();
} catch (e) {
  note(`not built (${e instanceof Error ? e.message : String(e)}); the soft devices work as ever`);
}
process.exitCode = 0;
