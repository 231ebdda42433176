// Interop harness: boot the reference VM (Debian guest with the kernel's siw and rdma-core's
// real tools; its scripts live in $REFVM_HOME, see docs/interop.md), run a guest job in it, and run host-side
// processes against it inside the `refvm` network namespace.
//
//   const avail = await refvmAvailable();            // {ok, reason}
//   const res = await withGuest({ name, rdma: 'siw', job: '<bash>', timeoutSec }, async (ctx) => {
//     await ctx.waitFile('ready-0', 60_000);
//     const r = await ctx.hostRun('node', ['dist/cli/rping.js', ...], { timeoutMs: 120_000 });
//   });
//
// Network: tap mode only. The guest is 10.77.0.(2+vm), the host side 10.77.0.1 exists only in
// the `refvm` namespace, so every host process runs under `ip netns exec refvm`. Nothing else
// is contacted.
//
// Guest side: the job runs after a prelude of shell functions (guest-prelude.sh) with cwd = the job
// folder (/mnt/host in the guest, a 9p share): whatever it writes there is visible here at
// once. The job must `mark ready` when it is up. When the job ends the prelude writes job.rc and
// waits for the host's `done` file; the VM then powers off.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync, mkdirSync, readdirSync, statSync, renameSync, linkSync, copyFileSync, chmodSync, rmSync } from 'node:fs';
import { dirname, join, resolve, delimiter } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const REFVM_HOME = resolve(process.env.REFVM_HOME || join(REPO_ROOT, '..', 'shared', 'refvm'));
export const REFVM_DIR = process.env.REFVM_DIR || '/var/tmp/rdmacm-refvm';
export const NETNS = process.env.REFVM_NS || 'refvm';
export const HOST_IP = '10.77.0.1';
export const guestIp = (vm = 0) => `10.77.0.${2 + vm}`;

/**
 * The VM slot (tap rvtap<n>, guest 10.77.0.(2+n)) a file boots its guests on: `REFVM_VM` when set
 * (test/interop/lanes.js runs two files at once, one per slot, and sets it for each), else the
 * file's own choice.
 */
export function vmSlot(fallback = 0) {
  const v = process.env.REFVM_VM;
  return v !== undefined && v !== '' ? Number(v) : fallback;
}
const RUNS_DIR = process.env.REFVM_INTEROP_RUNS || join(REFVM_DIR, 'runs');
const IMAGE_FILES = ['vmlinuz', 'initrd-tiny.cpio', 'rootfs.img'];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const stamp = () => new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
export const log = (msg) => process.stderr.write(`[interop ${new Date().toISOString().slice(11, 23)}] ${msg}\n`);

function which(cmd) {
  for (const d of (process.env.PATH || '').split(delimiter)) {
    const p = join(d, cmd);
    try { if (statSync(p).isFile()) return p; } catch { /* next */ }
  }
  return null;
}

/** Loud notice on stderr (node --test shows a test file's stderr as `# ...` lines). */
export function banner(text) {
  const bar = '!'.repeat(78); // not '#': the TAP reporter escapes it
  process.stderr.write(`\n${bar}\n${text.split('\n').map((l) => `!! ${l}`).join('\n')}\n${bar}\n\n`);
}

// ------------------------------------------------------------------------------ processes
// Every process we start gets its own process group and a deadline. On a hang we end its
// whole tree, found by parent pid in /proc (qemu runs under `timeout`, which makes a group of
// its own, so killing one group is not enough). Only descendants of our own children are ever
// signalled, each by pid.
const live = new Set();

function descendants(pid) {
  const kids = new Map();
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const st = readFileSync(`/proc/${e}/stat`, 'utf8');
      const ppid = Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]);
      if (!kids.has(ppid)) kids.set(ppid, []);
      kids.get(ppid).push(Number(e));
    } catch { /* gone */ }
  }
  const out = [];
  const walk = (p) => { for (const c of kids.get(p) || []) { out.push(c); walk(c); } };
  walk(pid);
  return out;
}

function signalTree(pid, sig) {
  const all = [pid, ...descendants(pid)];
  for (const p of all.reverse()) { try { process.kill(p, sig); } catch { /* gone */ } }
}

export async function killTree(pid, graceMs = 3000) {
  signalTree(pid, 'SIGTERM');
  const t0 = Date.now();
  while (Date.now() - t0 < graceMs) {
    try { process.kill(pid, 0); } catch { return; }
    await sleep(100);
  }
  signalTree(pid, 'SIGKILL');
}

function cleanupAll() { for (const pid of live) signalTree(pid, 'SIGKILL'); }
process.on('exit', cleanupAll);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => { cleanupAll(); process.exit(130); });
}

// Each process runs under a small bash watchdog: should this node process die without its
// exit handler (SIGKILL, a runner's timeout), the watchdog ends the process tree within a
// second, so no VM outlives the test that started it (an orphan would hold the tap device).
// The wrapper exits with the child's status. Its own messages (bash's job notices, such as
// "Terminated" when the child is killed) go nowhere; the child keeps the original stderr.
const WATCHDOG = `p=$1; shift; exec 3>&2 2>/dev/null; "$@" 2>&3 3>&- & c=$!
tree() { local k; for k in $(ps -o pid= --ppid "$1" 2>/dev/null); do tree "$k"; done; echo "$1"; }
while kill -0 "$c" 2>/dev/null; do
  if ! kill -0 "$p" 2>/dev/null; then kill -TERM $(tree "$c") 2>/dev/null; sleep 3; kill -KILL $(tree "$c") 2>/dev/null; break; fi
  sleep 0.2
done
wait "$c"`;

/**
 * Start a process with a deadline. Returns {pid, done, kill, output}; `done` resolves to
 * {code, signal, stdout, stderr, timedOut, ms} and never rejects (a failure to start is
 * code 127 with the error in stderr).
 */
export function startProcess(cmd, args, { timeoutMs = 120_000, env, cwd, label } = {}) {
  const t0 = Date.now();
  const out = [], err = [];
  let timedOut = false;
  const child = spawn('bash', ['-c', WATCHDOG, 'interop-watchdog', String(process.pid), cmd, ...args],
    { env: { ...process.env, ...env }, cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  if (child.pid) live.add(child.pid);
  child.stdout.on('data', (b) => out.push(b));
  child.stderr.on('data', (b) => err.push(b));
  const timer = setTimeout(() => {
    timedOut = true;
    log(`${label || cmd}: no exit after ${timeoutMs} ms, killing pid ${child.pid} and its children`);
    killTree(child.pid);
  }, timeoutMs);
  const done = new Promise((res) => {
    let spawnError = null;
    child.on('error', (e) => { spawnError = e; });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      live.delete(child.pid);
      res({
        code: spawnError ? 127 : code, signal, timedOut, ms: Date.now() - t0,
        stdout: Buffer.concat(out).toString('latin1'),
        stderr: Buffer.concat(err).toString('latin1') + (spawnError ? `\n[spawn error] ${spawnError.message}` : ''),
      });
    });
  });
  return {
    pid: child.pid,
    done,
    kill: () => (child.pid ? killTree(child.pid) : Promise.resolve()),
    output: () => Buffer.concat(out).toString('latin1') + Buffer.concat(err).toString('latin1'),
  };
}

/** Run a process in the refvm network namespace (host side 10.77.0.1). */
export function netnsStart(cmd, args = [], opts = {}) {
  return startProcess('ip', ['netns', 'exec', NETNS, cmd, ...args], { label: `${cmd} ${args.join(' ')}`.slice(0, 120), ...opts });
}
export const netnsRun = (cmd, args = [], opts = {}) => netnsStart(cmd, args, opts).done;

/** Run a command to completion outside the namespace (for setup), with a deadline. */
export const run = (cmd, args = [], opts = {}) => startProcess(cmd, args, { label: cmd, ...opts }).done;

/**
 * A host process of ours, once the kernel side of its scenario is done: its result if it ends on
 * its own within `ms`, else it is killed and its stderr says so.
 */
export async function settle(p, ms = 30_000) {
  // The deadline's timer is cleared once the run ends: a pending one would keep the test file's
  // process alive up to `ms` after its last test.
  let timer;
  const deadline = new Promise((resolve) => { timer = setTimeout(resolve, ms, null); });
  const r = await Promise.race([p.done, deadline]);
  clearTimeout(timer);
  if (r) return r;
  await p.kill();
  const k = await p.done;
  k.stderr += `\n[killed: still running ${ms} ms after the kernel side ended]`;
  return k;
}

/** Keep a host run's stdout, stderr and exit status in the job folder as `<name>.out/.err/.rc`. */
export function saveRun(ctx, name, r) {
  if (!r) return;
  ctx.touch(`${name}.out`, r.stdout);
  ctx.touch(`${name}.err`, r.stderr);
  ctx.touch(`${name}.rc`, `${r.code}${r.timedOut ? ' timed out' : ''}\n`);
}

// ------------------------------------------------------------------------------ availability
let availability = null;

function imageMissing() {
  const missing = IMAGE_FILES.filter((f) => { try { return statSync(join(REFVM_DIR, f)).size === 0; } catch { return true; } });
  return missing.length ? `missing in ${REFVM_DIR}: ${missing.join(', ')}` : null;
}

function buildRunning() {
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      const argv = readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0');
      if (argv.some((a) => a.endsWith('refvm-build.sh'))) return Number(e);
    } catch { /* gone */ }
  }
  return 0;
}

async function tryBuild() {
  // One attempt per test run: node --test runs every test file in its own process, all
  // children of the same runner, so the marker is keyed by the runner's pid.
  const marker = join(tmpdir(), `rdmacm-refvm-build-${process.ppid}.json`);
  if (existsSync(marker)) {
    const m = JSON.parse(readFileSync(marker, 'utf8'));
    return m.ok ? null : m.reason;
  }
  let reason = null;
  const other = buildRunning();
  if (other) {
    log(`another refvm-build.sh is running (pid ${other}); waiting for it (up to 18 min) instead of starting a second build`);
    const t0 = Date.now();
    while (buildRunning() && Date.now() - t0 < 18 * 60_000) await sleep(5000);
    reason = imageMissing() ? `the concurrent image build (pid ${other}) finished without an image: ${imageMissing()}` : null;
  } else {
    const logFile = join(tmpdir(), `rdmacm-refvm-build-${process.ppid}.log`);
    log(`REFVM_BUILD=1 and the image is missing: running ${REFVM_HOME}/refvm-build.sh --reuse (≈4-5 min; log ${logFile})`);
    const r = await run(join(REFVM_HOME, 'refvm-build.sh'), ['--reuse'], { timeoutMs: 18 * 60_000 }); // under the 20-min test timeout
    writeFileSync(logFile, r.stdout + r.stderr);
    const tail = (r.stdout + r.stderr).trim().split('\n').slice(-8).join('\n');
    if (r.code !== 0) reason = `refvm-build.sh --reuse failed (exit ${r.code}${r.timedOut ? ', timed out' : ''}); log ${logFile}; last lines:\n${tail}`;
    else if (imageMissing()) reason = `refvm-build.sh --reuse exited 0 but ${imageMissing()}`;
  }
  writeFileSync(marker, JSON.stringify({ ok: !reason, reason }));
  return reason;
}

/**
 * Can the reference VM run here? {ok, reason}. With REFVM_BUILD=1 a missing image is built
 * once (refvm-build.sh --reuse; it needs root, debootstrap and Debian's mirror).
 */
export async function refvmAvailable() {
  if (availability) return availability;
  const no = (reason) => (availability = { ok: false, reason });
  if (process.platform !== 'linux') return no(`not Linux (${process.platform})`);
  if (typeof process.getuid === 'function' && process.getuid() !== 0) return no('not root (network namespaces and taps need root)');
  if (!existsSync(join(REFVM_HOME, 'refvm-run.sh'))) return no(`no reference VM scripts at ${REFVM_HOME} (set REFVM_HOME)`);
  if (!which('qemu-system-x86_64')) return no('qemu-system-x86_64 not installed (apt-get install qemu-system-x86)');
  if (!which('ip')) return no('iproute2 `ip` not installed');
  if (!existsSync('/dev/net/tun')) return no('no /dev/net/tun (tap networking impossible)');
  let missing = imageMissing();
  if (missing && process.env.REFVM_BUILD === '1') {
    const why = await tryBuild();
    if (why) return no(`VM image could not be built: ${why}`);
    missing = imageMissing();
  }
  if (missing) return no(`VM image not built (${missing}); run ${REFVM_HOME}/refvm-build.sh --reuse or set REFVM_BUILD=1`);
  return (availability = { ok: true, reason: '' });
}

/**
 * In a test: skip it loudly when the VM is unavailable (banner on stderr + t.skip(reason)).
 * Returns true when the test may go on. REFVM_REQUIRE=1 turns the skip into a failure.
 */
export async function requireRefvm(t) {
  const a = await refvmAvailable();
  return a.ok || skipLoudly(t, `reference VM unavailable: ${a.reason}`);
}

/**
 * In a test: skip it loudly when any of `files` (our tools, the addons it runs) is not built;
 * `how` says how to build them. Returns true when the test may go on. REFVM_REQUIRE=1 turns the
 * skip into a failure.
 */
export function requireBuilt(t, files, how) {
  const missing = files.filter((f) => !existsSync(f));
  return missing.length === 0 || skipLoudly(t, `not built: ${missing.join(', ')} (${how})`);
}

/** Skip test `t` with a banner on stderr saying why (`msg`); a failure under REFVM_REQUIRE=1. Returns false. */
function skipLoudly(t, msg) {
  banner(`INTEROP TEST SKIPPED: ${t.name}\n${msg}\nThis is NOT a pass: nothing was checked against the kernel.`);
  if (process.env.REFVM_REQUIRE === '1') throw new Error(`${msg} (REFVM_REQUIRE=1)`);
  t.skip(msg);
  return false;
}

// ------------------------------------------------------------------------------ the guest
// Helpers available to every guest job (bash, in the guest, cwd = the job folder).
const GUEST_PRELUDE = readFileSync(join(dirname(fileURLToPath(import.meta.url)), 'guest-prelude.sh'), 'utf8');

function readText(file) { try { return readFileSync(file, 'latin1'); } catch { return null; } }
const tail = (s, n = 25) => (s || '').trimEnd().split('\n').slice(-n).join('\n');

/**
 * The `NAME.hang` part of a failure message: what a guest tool still running 2 s before its
 * deadline was doing (gtool's gdump), first `lines` lines; '' when it ended in time.
 */
export function hangOf(g, lines = 80) {
  if (!g?.hang) return '';
  return `\n  2 s before its deadline (the job folder has the rest):\n${g.hang.trimEnd().split('\n').slice(0, lines).join('\n')}`;
}

/**
 * Boot a guest, run `job` in it, run `fn(ctx)` on the host meanwhile, shut down.
 * opts: name, job (bash), rdma ('siw'|'rxe'|'siw,rxe'), vm (0|1), timeoutSec (whole VM life),
 *       bootTimeoutSec (until `ready`), cpus, mem, src (a host folder shared read-only at
 *       /mnt/src), node (true: this machine's node binary at $H/node in the guest).
 * ctx: jobDir, guestIp, hostIp, hostRun/hostStart (in the netns), waitFile, touch, read, result,
 *      bootMs, log.
 * Resolves to {rc, jobRc, guestLog, consoleLog, jobDir, bootMs, wallMs, value, read}. A throw
 * from fn is rethrown after the VM is down, with the guest log's tail appended.
 */
export async function withGuest(opts, fn) {
  const { name = 'job', job, rdma = 'siw', vm = vmSlot(0), timeoutSec = 900, bootTimeoutSec = 300, cpus, mem, src, node } = opts;
  const a = await refvmAvailable();
  if (!a.ok) throw new Error(`reference VM unavailable: ${a.reason}`);
  const up = await run(join(REFVM_HOME, 'refvm-netns.sh'), ['up'], { timeoutMs: 30_000 });
  if (up.code !== 0) throw new Error(`refvm-netns.sh up failed (${up.code}): ${up.stderr}`);

  const jobDir = join(RUNS_DIR, `interop-${name}-${stamp()}-${process.pid}`);
  mkdirSync(jobDir, { recursive: true });
  const file = (n) => join(jobDir, n);
  const jobSrc = [
    GUEST_PRELUDE,
    '(',
    job,
    ')',
    'JOBRC=$?',
    'glog "job exit $JOBRC"; putrc job $JOBRC',
    `waitfile "$H/done" ${timeoutSec} || glog "no done file from the host within ${timeoutSec}s"`,
    'exit $JOBRC',
  ].join('\n');
  writeFileSync(file('.job-src.sh'), jobSrc);
  // `node: true`: this machine's node binary for the guest, at $H/node (a hard link, else a copy).
  if (node) {
    try { linkSync(process.execPath, file('node')); } catch { copyFileSync(process.execPath, file('node')); }
    chmodSync(file('node'), 0o755);
  }

  const t0 = Date.now();
  let vmProc, exitInfo, bootMs, tBoot;
  // A tap carries one VM at a time: if someone else's VM holds rvtap<vm>, qemu fails with
  // "Device or resource busy"; wait and retry for up to 5 minutes.
  for (let attempt = 1; ; attempt++) {
    for (const f of ['ready', 'done', 'rc', 'job.rc', 'console.log']) { try { renameSync(file(f), file(`${f}.attempt${attempt - 1}`)); } catch { /* none */ } }
    exitInfo = null;
    tBoot = Date.now();
    const args = ['--net', 'tap', '--vm', String(vm), '--rdma', rdma, '--job', jobDir, '--timeout', String(timeoutSec), '-f', file('.job-src.sh')];
    if (cpus) args.push('--cpus', String(cpus));
    if (src) args.push('--src', src);
    if (mem) args.push('--mem', String(mem));
    log(`${name}: booting VM${vm} (rdma ${rdma}, tap, limit ${timeoutSec}s), job folder ${jobDir}`);
    vmProc = startProcess(join(REFVM_HOME, 'refvm-run.sh'), args, { timeoutMs: (timeoutSec + 60) * 1000, label: `refvm-run ${name}` });
    vmProc.done.then((r) => { exitInfo = r; writeFileSync(file('refvm-run.log'), r.stdout + r.stderr); });
    // wait for `ready`, or the VM's end
    const deadline = Date.now() + bootTimeoutSec * 1000;
    while (!existsSync(file('ready')) && !exitInfo && Date.now() < deadline) await sleep(200);
    if (existsSync(file('ready'))) { bootMs = Date.now() - tBoot; break; }
    if (!exitInfo) {
      await vmProc.kill();
      await vmProc.done;
      throw new Error(`${name}: the guest did not mark ready within ${bootTimeoutSec}s; console:\n${tail(readText(file('console.log')))}`);
    }
    const con = readText(file('console.log')) || exitInfo.stdout + exitInfo.stderr;
    if (/Device or resource busy/.test(con) && Date.now() - t0 < 300_000) {
      log(`${name}: rvtap${vm} is busy (another VM on it?); retrying in 15 s`);
      await sleep(15_000);
      continue;
    }
    throw new Error(`${name}: the VM ended (refvm-run exit ${exitInfo.code}) before the guest marked ready; job.rc=${readText(file('job.rc'))?.trim()}; guest log:\n${tail(readText(file('guest.log')))}\nconsole:\n${tail(con)}`);
  }
  log(`${name}: guest ready after ${(bootMs / 1000).toFixed(1)} s`);

  const guestEnded = () => existsSync(file('job.rc')) || exitInfo;
  const ctx = {
    name, jobDir, vm, guestIp: guestIp(vm), hostIp: HOST_IP, bootMs,
    log: (m) => log(`${name}: ${m}`),
    /** Wait for a file the guest creates; rejects on timeout or when the guest job has ended without it. */
    async waitFile(n, timeoutMs = 120_000) {
      const end = Date.now() + timeoutMs;
      for (;;) {
        if (existsSync(file(n))) return true;
        if (guestEnded() && !existsSync(file(n))) {
          await sleep(500);
          if (existsSync(file(n))) return true;
          throw new Error(`guest job ended (job.rc=${readText(file('job.rc'))?.trim()}, vm ${exitInfo ? 'down' : 'up'}) without creating ${n}; guest log:\n${tail(readText(file('guest.log')))}`);
        }
        if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for the guest to create ${n}; guest log:\n${tail(readText(file('guest.log')))}`);
        await sleep(150);
      }
    },
    touch: (n, content = '') => writeFileSync(file(n), content, 'latin1'),
    read: (n) => readText(file(n)),
    /**
     * {rc, out, err, hang} of a guest gtool/gstart NAME (rc null if not finished; hang: what
     * gtool's gdump saw 2 s before the deadline, '' when the run ended in time).
     */
    result: (n) => {
      const rc = readText(file(`${n}.rc`));
      return { rc: rc === null ? null : Number(rc.trim()), out: readText(file(`${n}.out`)) ?? '', err: readText(file(`${n}.err`)) ?? '', hang: readText(file(`${n}.hang`)) ?? '' };
    },
    /**
     * Capture the bridge to the job folder's `name` (tcpdump, the first `snap` bytes of each
     * packet, `filter`) for diagnosis; resolves to a function that stops the capture (calling
     * it again only waits for the same stop).
     */
    capture: async (name, filter, { snap = 160, timeoutMs = 1_800_000 } = {}) => {
      const p = netnsStart('tcpdump', ['-Z', 'root', '--immediate-mode', '-i', 'rvbr0', '-U', '-s', String(snap), '-w', file(name), filter], { timeoutMs });
      // tcpdump opens the interface a moment after it starts; a packet before that is not seen.
      const t0 = Date.now();
      while (!existsSync(file(name)) && Date.now() - t0 < 5000) await sleep(50);
      let stopped = null;
      return () =>
        (stopped ??= (async () => {
          await p.kill();
          await p.done;
        })());
    },
    hostStart: (cmd, args, o) => netnsStart(cmd, args, o),
    hostRun: (cmd, args, o) => netnsRun(cmd, args, o),
  };

  let value, failure = null;
  try {
    value = await fn(ctx);
  } catch (e) {
    failure = e;
  }
  ctx.touch('done');
  const stopBy = Date.now() + 120_000;
  while (!exitInfo && Date.now() < stopBy) await sleep(200);
  if (!exitInfo) {
    log(`${name}: VM still up 120 s after done; killing it`);
    await vmProc.kill();
  }
  await vmProc.done;
  const wallMs = Date.now() - t0;
  const rcText = readText(file('rc'));
  const res = {
    rc: rcText === null ? null : Number(rcText.trim()),
    jobRc: readText(file('job.rc')) === null ? null : Number(readText(file('job.rc')).trim()),
    guestLog: readText(file('guest.log')) ?? '',
    consoleLog: readText(file('console.log')) ?? '',
    jobDir, bootMs, wallMs, value,
    read: (n) => readText(file(n)),
  };
  if (node) rmSync(file('node'), { force: true });
  log(`${name}: VM down; boot ${(bootMs / 1000).toFixed(1)} s, total ${(wallMs / 1000).toFixed(1)} s, guest rc ${res.rc}`);
  if (failure) {
    failure.message += `\n--- ${name}: guest log tail (${jobDir}) ---\n${tail(res.guestLog, 40)}`;
    throw failure;
  }
  return res;
}
