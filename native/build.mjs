#!/usr/bin/env node
// Builds the optional native addons with the system C compiler and no download. Run by
// `npm install` (the package's `install` script) and by `npm run build:native`.
//  - native/build/netopt.node: the socket calls the soft devices need — the soft RoCE device's
//    options to speak to a kernel rxe (IPv4 identification 0, IPv6 UDP checksum 0 accepted), and
//    the unsent bytes the soft iWARP device's graceful close waits on (native/src/netopt.c), and
//    the RoCE device's batched UDP sockets (recvmmsg/sendmmsg, native/src/udpio.c); needs only
//    Node's headers.
//  - native/build/rdmacm.node: the native backend over rdma-core's libibverbs and librdmacm.
//
// It never fails the install and never downloads anything: where the compiler, Node's headers or
// rdma-core's headers (`apt install libibverbs-dev librdmacm-dev`) are missing it prints one line
// naming what to install and how to build again (`npm rebuild rdmacm` in a project that depends on
// the package, `npm run build:native` in its own clone) and exits 0; the package then runs on its
// soft devices only (and without netopt.node, the soft RoCE device talks to our own processes but
// not to a kernel rxe over IPv4). The outcome of each addon is kept in build-status.json beside
// them, where the loader (src/native/binding.ts) reads why an addon is absent, so that
// `rdmacm-devices` says it later.
//
// Environment: CC (compiler, default `cc`), RDMACM_NATIVE_BUILD=0 (skip), npm_config_nodedir /
// NODEDIR (where Node's include/node is), RDMACM_NATIVE_VERBOSE=1 (print the compiler output),
// RDMACM_NATIVE_OUT (the file to write instead of native/build/rdmacm.node; netopt.node goes
// beside it).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve, sep } from 'node:path';
import { homedir } from 'node:os';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const OUT = process.env.RDMACM_NATIVE_OUT ? resolve(process.env.RDMACM_NATIVE_OUT) : join(HERE, 'build', 'rdmacm.node');
const SOURCES = ['addon.c', 'verbs.c', 'cm.c', 'srq.c', 'mw.c'].map((f) => join(HERE, 'src', f));
const verbose = process.env.RDMACM_NATIVE_VERBOSE === '1';
/** Where each addon's outcome is kept for the loader (src/native/binding.ts reads it). */
const STATUS = join(dirname(OUT), 'build-status.json');
/** The command that runs this script again: a dependency is rebuilt by npm, a clone by its script. */
const REBUILD = HERE.split(sep).includes('node_modules') ? 'npm rebuild rdmacm' : 'npm run build:native';
/** rdma-core's development packages, as Debian and Fedora name them. */
const RDMA_CORE_DEV = 'install libibverbs-dev and librdmacm-dev (Debian, Ubuntu) or rdma-core-devel (Fedora, RHEL)';

function note(msg, what = 'native addon') {
  process.stdout.write(`rdmacm: ${what} ${msg}\n`);
}

/** Keep the outcome of building `file` (a reason, or null once built) for the loader. */
function record(file, reason) {
  let all = {};
  try {
    all = JSON.parse(readFileSync(STATUS, 'utf8'));
  } catch {
    // none yet, or unreadable: start again
  }
  all[basename(file)] = reason === null ? { built: true } : { built: false, reason };
  try {
    mkdirSync(dirname(STATUS), { recursive: true });
    writeFileSync(STATUS, `${JSON.stringify(all, null, 2)}\n`);
  } catch {
    // a read-only package directory: the line printed is all there is
  }
}

/** Say once why the rdma-core addon is not built, and keep the reason. */
function notBuilt(why) {
  record(OUT, why);
  note(`not built (${why}); the soft devices work as ever`);
}

/** Compile `sources` into the addon `out`; returns the compiler's output on failure, else null. */
function compile(cc, inc, sources, out, libs, defines = []) {
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  const args = [
    '-shared', '-fPIC', '-O2', '-std=gnu11', '-Wall', '-Wextra', '-Wno-unused-parameter', '-Wno-missing-field-initializers',
    '-fvisibility=hidden', '-DNODE_GYP_MODULE_NAME=rdmacm', `-I${inc}`, ...defines,
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
  const src = join(HERE, 'src', 'netopt.c');
  // The batched UDP sockets need libuv's header and recvmmsg/sendmmsg; without them, the rest.
  const crc = join(HERE, 'src', 'crc32.c');
  let failed = compile(cc, inc, [src, crc, join(HERE, 'src', 'udpio.c')], out, [], ['-DRDMACM_UDPIO']);
  if (failed !== null) {
    note('built without its batched UDP sockets (udpio.c did not compile); the soft RoCE device uses Node dgram', 'netopt addon');
    if (verbose) process.stdout.write(failed);
    failed = compile(cc, inc, [src, crc], out, []);
  }
  record(out, failed === null ? null : 'compile failed');
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
  if (process.env.npm_config_devdir) dirs.push(join(process.env.npm_config_devdir, v, 'include', 'node'));
  dirs.push(join(homedir(), '.cache', 'node-gyp', v, 'include', 'node'));
  dirs.push(join(homedir(), '.node-gyp', v, 'include', 'node'));
  return dirs;
}

function main() {
  if (process.env.RDMACM_NATIVE_BUILD === '0') {
    notBuilt(`RDMACM_NATIVE_BUILD=0 when it was last built: unset it, then ${REBUILD}`);
    return;
  }
  if (process.platform !== 'linux') {
    notBuilt(`${process.platform}: rdma-core is Linux only`);
    return;
  }
  const inc = nodeIncludeDirs().find((d) => existsSync(join(d, 'node_api.h')) && existsSync(join(d, 'uv.h')));
  if (!inc) {
    // npm's own node-gyp can fetch them (a download, which this script never makes itself).
    const gyp = process.env.npm_config_node_gyp ? `node ${process.env.npm_config_node_gyp} install` : 'node-gyp install';
    notBuilt(`Node's headers (node_api.h) not found: set npm_config_nodedir to a Node source or headers directory, or fetch them with ${gyp}; then ${REBUILD}`);
    return;
  }
  const cc = process.env.CC || 'cc';
  const probe = spawnSync(cc, ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    notBuilt(`no C compiler '${cc}': install gcc (Debian: build-essential), then ${REBUILD}`);
    return;
  }
  buildNetopt(cc, inc);
  const out = compile(cc, inc, SOURCES, OUT, ['-libverbs', '-lrdmacm']);
  if (out !== null) {
    const header = /(infiniband\/verbs\.h|rdma\/rdma_cma\.h)[^\n]*No such file/.exec(out);
    const lib = /cannot find -l(ibverbs|rdmacm)/.exec(out);
    let why;
    if (header) why = `rdma-core's header ${header[1]} not found: ${RDMA_CORE_DEV}, then ${REBUILD}`;
    else if (lib) why = `rdma-core's library lib${lib[1]} not found: ${RDMA_CORE_DEV}, then ${REBUILD}`;
    else why = `compile failed (RDMACM_NATIVE_VERBOSE=1 ${REBUILD} shows the compiler's output)`;
    notBuilt(why);
    if (verbose) process.stdout.write(out);
    return;
  }
  record(OUT, null);
  note(`built: ${OUT} (check with: npx rdmacm-devices)`);
}

try {
  main();
} catch (e) {
  try {
    notBuilt(e instanceof Error ? e.message : String(e));
  } catch {
    note(`not built (${e instanceof Error ? e.message : String(e)}); the soft devices work as ever`);
  }
}
process.exitCode = 0;
