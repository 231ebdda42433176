// Shared code for the two-process CLI tests: spawn a tool with a deadline (killed on hang),
// pick free ports, wait until a server listens, and the expected output of rping's -v.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sleep } from './wait.js';

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const RPING = join(REPO_ROOT, 'dist', 'cli', 'rping.js');


/**
 * Start `node <script> ...args` (inside network namespace `netns` when given: `ip netns exec`
 * replaces itself with node, so the child is the tool), in directory `cwd` when given. Returns a handle: `stdout()`/`stderr()`
 * (output so far), `kill()`, and `done`, a promise of `{ code, signal, stdout, stderr, timedOut,
 * ms }`. The process is SIGKILLed when it outlives `timeoutMs` (then `timedOut` is true).
 */
export function startCli(script, args, { timeoutMs = 20_000, env, netns, nodeArgs = [], cwd } = {}) {
  const t0 = Date.now();
  const node = [...nodeArgs, script, ...args];
  const [cmd, argv] = netns ? ['ip', ['netns', 'exec', netns, process.execPath, ...node]] : [process.execPath, node];
  const child = spawn(cmd, argv, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
    cwd,
  });
  const out = [];
  const err = [];
  child.stdout.on('data', (b) => out.push(b));
  child.stderr.on('data', (b) => err.push(b));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, timeoutMs);
  const stdout = () => Buffer.concat(out).toString('latin1');
  const stderr = () => Buffer.concat(err).toString('latin1');
  const done = new Promise((resolve) => {
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: stdout(), stderr: stderr(), timedOut, ms: Date.now() - t0 });
    });
  });
  return {
    child,
    done,
    stdout,
    stderr,
    kill: (sig = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    },
  };
}

/** Run to completion (see {@link startCli}). */
export function runCli(script, args, opts) {
  return startCli(script, args, opts).done;
}

/** A short description of a finished run, for assertion messages. */
export function describeRun(what, r) {
  const clip = (s) => (s.length > 2000 ? `${s.slice(0, 2000)}…(${s.length} bytes)` : s);
  return `${what}: exit ${r.code}${r.signal ? ` signal ${r.signal}` : ''}${r.timedOut ? ' TIMED OUT' : ''} in ${r.ms} ms\n` +
    `  stderr: ${JSON.stringify(clip(r.stderr))}\n  stdout: ${JSON.stringify(clip(r.stdout))}`;
}

/**
 * A network namespace of this test process with only its loopback interface, up: `name`, and
 * `remove()` (run it in `after`). `skip` is a reason when one cannot be made (not root, no `ip`).
 */
export function makeNetns(tag) {
  const name = `rdmacm-${tag}-${process.pid}`;
  const ip = (...a) => spawnSync('ip', a, { encoding: 'utf8' });
  const r = ip('netns', 'add', name);
  if (r.error || r.status !== 0) return { name, skip: `cannot create a network namespace: ${(r.error?.message ?? r.stderr).trim()}`, remove() {} };
  const up = ip('netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up');
  const remove = () => void ip('netns', 'del', name);
  if (up.status !== 0) {
    remove();
    return { name, skip: `cannot bring lo up in ${name}: ${up.stderr.trim()}`, remove() {} };
  }
  return { name, skip: false, remove };
}

/**
 * Two network namespaces joined by a veth pair: `a` (10.66.<n>.1/24 on `va`) and `b`
 * (10.66.<n>.2/24 on `vb`), each with its loopback up — two hosts on one link, for traffic that
 * must leave a host (multicast without loopback). `{ a, b, ipA, ipB, skip, remove() }`.
 */
export function makeVethPair(tag, n = process.pid % 250) {
  const a = `rdmacm-${tag}-a-${process.pid}`;
  const b = `rdmacm-${tag}-b-${process.pid}`;
  const ipA = `10.66.${n}.1`;
  const ipB = `10.66.${n}.2`;
  const ip = (...x) => spawnSync('ip', x, { encoding: 'utf8' });
  const remove = () => {
    ip('netns', 'del', a);
    ip('netns', 'del', b);
  };
  const steps = [
    ['netns', 'add', a],
    ['netns', 'add', b],
    ['link', 'add', 'va', 'netns', a, 'type', 'veth', 'peer', 'name', 'vb', 'netns', b],
    ['-n', a, 'addr', 'add', `${ipA}/24`, 'dev', 'va'],
    ['-n', b, 'addr', 'add', `${ipB}/24`, 'dev', 'vb'],
    ['-n', a, 'link', 'set', 'va', 'up'],
    ['-n', b, 'link', 'set', 'vb', 'up'],
    ['-n', a, 'link', 'set', 'lo', 'up'],
    ['-n', b, 'link', 'set', 'lo', 'up'],
  ];
  for (const st of steps) {
    const r = ip(...st);
    if (r.error || r.status !== 0) {
      remove();
      return { a, b, ipA, ipB, skip: `cannot set up a veth pair (ip ${st.join(' ')}): ${(r.error?.message ?? r.stderr).trim()}`, remove() {} };
    }
  }
  return { a, b, ipA, ipB, skip: false, remove };
}

function listeningIn(file, port) {
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  return text.split('\n').some((l) => {
    const f = l.trim().split(/\s+/);
    return f[1]?.endsWith(`:${hex}`) && f[3] === '0A';
  });
}

/**
 * Resolve once something listens on TCP `port` (read from /proc/net/tcp{,6}, so no connection is
 * made to the server), or reject after `timeoutMs` or when `exited` resolves first. Without /proc
 * it just waits a second.
 */
export async function waitListening(port, { timeoutMs = 10_000, exited } = {}) {
  let gone = false;
  exited?.then(() => {
    gone = true;
  });
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    if (gone) throw new Error(`the server exited before listening on ${port}`);
    const v4 = listeningIn('/proc/net/tcp', port);
    const v6 = listeningIn('/proc/net/tcp6', port);
    if (v4 === null && v6 === null) {
      await sleep(1000);
      return;
    }
    if (v4 || v6) return;
    await sleep(25);
  }
  throw new Error(`nothing listens on ${port} after ${timeoutMs} ms`);
}

/** The RDMA_PS_TCP and RDMA_PS_UDP port spaces, the high half of an rdma_cm service ID. */
export const PS_TCP = 0x0106;
export const PS_UDP = 0x0111;

/**
 * Resolve once a process of this host listens for port `port` of port space `ps` on the soft
 * RoCE device using UDP port `rocePort`: it publishes the service ID as an abstract Unix socket
 * name (seen in /proc/net/unix; of process `netPid`'s network namespace when given). Rejects after
 * `ms` or when `exited` resolves first.
 */
export async function waitRoceListening(rocePort, port, exited, ms = 10_000, ps = PS_TCP, netPid = 'self') {
  const sid = (ps * 0x10000 + port).toString(16).padStart(16, '0');
  const name = `@rdmacm-roce-${rocePort}-svc-${sid}`;
  let gone = false;
  exited?.then(() => (gone = true));
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    if (gone) throw new Error(`the server exited before listening on ${port}`);
    if (readFileSync(`/proc/${netPid}/net/unix`, 'utf8').includes(name)) return;
    await sleep(20);
  }
  throw new Error(`nothing listens on RoCE port ${port}`);
}

// ---- rping's data pattern (rping.c rping_test_client; docs/man/rping.1.md) ------

/**
 * The text of ping `n` with buffer `size`: "rdma-ping-<n>: " then letters from 'A' + n mod 58,
 * incrementing and wrapping after 'z' back to 'A', filling the buffer; the last byte is the NUL,
 * so the text is size-1 characters.
 */
export function rpingText(n, size = 64) {
  const head = `rdma-ping-${n}: `;
  let s = head.slice(0, size - 1);
  let c = 65 + (n % 58);
  while (s.length < size - 1) {
    s += String.fromCharCode(c);
    c = c === 122 ? 65 : c + 1;
  }
  return s;
}

/** The stdout of `rping -v` for `count` pings: "ping data: ..." (client) or "server ping data: ...". */
export function rpingLines({ count, size = 64, role = 'client' }) {
  const prefix = role === 'server' ? 'server ping data: ' : 'ping data: ';
  let s = '';
  for (let n = 0; n < count; n++) s += `${prefix}${rpingText(n, size)}\n`;
  return s;
}

// ---- a lossy link that spares the CM's DREQs (tc netem) -------------------------

/**
 * The `tc` argument lists that impair what `dev` sends with `netem <netemArgs>`, except the IB CM
 * DREQs of RoCEv2 over IPv4, which go out untouched (the device impairment's `spare=dreq`). A
 * tool that exits right after rdma_disconnect, as rping's client does, sends its DREQ once (the
 * CM cancels the resend when the id is destroyed); a lost one leaves the peer waiting for ever.
 * A prio qdisc sends every packet to band 2, which holds the netem; a u32 filter moves the DREQs
 * to band 1. Offsets from the IPv4 header (20 bytes, no options): UDP at 20, BTH at 28 (its
 * destination QP, 1 for the GSI, in the low 24 bits of the word at 32), DETH at 40, the MAD at 48
 * (base version 1 and management class 7, the CM, in the halfword at 48; attribute ID 0x0015,
 * DREQ, at 64).
 */
export function netemSparingDreq(dev, netemArgs) {
  return [
    ['qdisc', 'replace', 'dev', dev, 'root', 'handle', '1:', 'prio', 'bands', '2', 'priomap', ...Array(16).fill('1')],
    ['qdisc', 'add', 'dev', dev, 'parent', '1:2', 'handle', '20:', 'netem', ...netemArgs],
    ['filter', 'add', 'dev', dev, 'parent', '1:', 'protocol', 'ip', 'prio', '1', 'u32',
      'match', 'ip', 'protocol', '17', '0xff', 'match', 'ip', 'dport', '4791', '0xffff',
      'match', 'u32', '0x00000001', '0x00ffffff', 'at', '32',
      'match', 'u16', '0x0107', '0xffff', 'at', '48', 'match', 'u16', '0x0015', '0xffff', 'at', '64',
      'flowid', '1:1'],
  ];
}
