#!/usr/bin/env node
// Builds the optional native addon (native/build/rdmacm.node) over rdma-core's libibverbs and
// librdmacm, with the system C compiler and no download. Run by `npm install` (the package's
// `install` script) and by `npm run build:native`.
//
// It never fails the install: where the compiler, Node's headers or rdma-core's headers
// (`apt install libibverbs-dev librdmacm-dev`) are missing it prints one line saying so and
// exits 0; the package then runs on its soft devices only.
//
// Environment: CC (compiler, default `cc`), RDMACM_NATIVE_BUILD=0 (skip), npm_config_nodedir /
// NODEDIR (where Node's include/node is), RDMACM_NATIVE_VERBOSE=1 (print the compiler output),
// RDMACM_NATIVE_OUT (the file to write instead of native/build/rdmacm.node).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { homedir } from 'node:os';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const OUT = process.env.RDMACM_NATIVE_OUT ? resolve(process.env.RDMACM_NATIVE_OUT) : join(HERE, 'build', 'rdmacm.node');
const OUT_DIR = dirname(OUT);
const SOURCES = ['addon.c', 'verbs.c', 'cm.c'].map((f) => join(HERE, 'src', f));
const verbose = process.env.RDMACM_NATIVE_VERBOSE === '1';

function note(msg) {
  process.stdout.write(`rdmacm: native addon ${msg}\n`);
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
  mkdirSync(OUT_DIR, { recursive: true });
  const tmp = `${OUT}.${process.pid}.tmp`;
  const args = [
    '-shared', '-fPIC', '-O2', '-std=gnu11', '-Wall', '-Wextra', '-Wno-unused-parameter', '-Wno-missing-field-initializers',
    '-fvisibility=hidden', '-DNODE_GYP_MODULE_NAME=rdmacm', `-I${inc}`,
    ...SOURCES, '-o', tmp, '-libverbs', '-lrdmacm',
  ];
  const r = spawnSync(cc, args, { encoding: 'utf8' });
  const out = `${r.stdout ?? ''}${r.stderr ?? ''}`;
  if (r.error || r.status !== 0) {
    rmSync(tmp, { force: true });
    let why = 'compile failed';
    if (/infiniband\/verbs\.h|rdma\/rdma_cma\.h/.test(out) && /No such file/.test(out)) why = "rdma-core's headers not found (apt install libibverbs-dev librdmacm-dev)";
    else if (/cannot find -l(ibverbs|rdmacm)/.test(out)) why = "rdma-core's libraries not found (apt install libibverbs-dev librdmacm-dev)";
    note(`not built (${why}); the soft devices work as ever`);
    if (verbose) process.stdout.write(out);
    return;
  }
  if (verbose && out.trim()) process.stdout.write(out);
  renameSync(tmp, OUT);
  note(`built: ${OUT} (check with: npx rdmacm-devices)`);
}

try {
  main();
} catch (e) {
  note(`not built (${e instanceof Error ? e.message : String(e)}); the soft devices work as ever`);
}
process.exitCode = 0;
