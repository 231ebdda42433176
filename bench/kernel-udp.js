// The kernel's UDP limit on this machine: what the soft RoCE device's UD and multicast rows could
// reach at most, since every RoCE packet is a UDP datagram. Printed beside those rows by
// bench/roce.js as "kernel UDP limit".
//
//   C blast   bench/udp-blast.c, built with `cc` at bench time into a temporary directory: a sender
//             moving 64 datagrams per sendmmsg(2) and receiver processes counting with
//             recvmmsg(2), each on one CPU as the bench's other pairs. Skipped, with the reason,
//             where no C compiler is installed.
//   iperf3    `iperf3 -u -b 0 -l SIZE` (a server and a client), where installed (Debian's iperf3;
//   sockperf  the bench does not install them): `sockperf throughput`, where installed.
//
// Rates are deliveries per second at the receivers (first to last arrival, summed over the
// receivers), as the RoCE rows count theirs; CPU time per delivery covers every process of the
// blast (the sender and the receivers).
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { pinned, run, which } from './lib.js';

const SOURCE = fileURLToPath(new URL('./udp-blast.c', import.meta.url));

let built = null;

/**
 * The C blast, built once per process: { cmd } or { skipped: why }. The binary lives in a
 * temporary directory removed when the process exits.
 */
export function udpBlastTool() {
  if (built) return built;
  const cc = process.env.CC || which('cc') || which('gcc') || which('clang');
  if (!cc) return (built = { skipped: 'no C compiler (cc) to build bench/udp-blast.c' });
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rdmacm-udp-blast-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const cmd = path.join(dir, 'udp-blast');
  try {
    execFileSync(cc, ['-O2', '-o', cmd, SOURCE], { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    return (built = { skipped: `${cc} could not build bench/udp-blast.c: ${String(e.stderr ?? e.message).trim().split('\n')[0]}` });
  }
  return (built = { cmd });
}

/** A receiver process of the C blast; `next()` resolves its next JSON line, `stop()` ends it. */
function receiver(cmd, port, group, cpu) {
  const c = spawn(...pinned(cpu, cmd, ['recv', String(port), ...(group ? [group] : [])]), { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = [];
  const waiters = [];
  createInterface({ input: c.stdout }).on('line', (l) => {
    const v = JSON.parse(l);
    const w = waiters.shift();
    if (w) w(v);
    else lines.push(v);
  });
  const kill = setTimeout(() => c.kill('SIGKILL'), 120_000);
  const exited = new Promise((r) => c.on('close', r));
  return {
    next: (ms = 20_000) =>
      lines.length
        ? Promise.resolve(lines.shift())
        : new Promise((resolve, reject) => {
            const t = setTimeout(() => reject(new Error(`udp-blast recv: nothing after ${ms} ms`)), ms);
            waiters.push((v) => (clearTimeout(t), resolve(v)));
            c.once('close', (code) => (clearTimeout(t), reject(new Error(`udp-blast recv exited ${code}`))));
          }),
    async stop() {
      clearTimeout(kill);
      c.stdin.end();
      await exited;
    },
  };
}

/**
 * One C blast of `count` datagrams of `size` bytes to `receivers` receiver processes on `port`
 * (to `group` when given, else 127.0.0.1), the receivers on CPU `pin[0]`, the sender on `pin[1]`.
 * Resolves { rate, sendRate, delivered, cpu, reports }: deliveries/s summed over the receivers,
 * the sender's datagrams/s, the fraction delivered, CPU µs per delivery of all the processes.
 */
export async function udpBlast(cmd, { count, size, group = null, receivers = 1, port, pin = null }) {
  const recv = Array.from({ length: receivers }, () => receiver(cmd, port, group, pin?.[0] ?? null));
  try {
    for (const r of recv) await r.next();
    // A receiver's group membership is in place when it says ready; let the first packets find it.
    if (group) await new Promise((r) => setTimeout(r, 50));
    const s = await run(cmd, ['send', group ?? '127.0.0.1', String(port), String(size), String(count)], { side: pin ? 1 : null, timeoutMs: 60_000 });
    if (s.code !== 0) throw new Error(`udp-blast send: exit ${s.code}\n${s.err}`);
    const sent = JSON.parse(s.out.trim().split('\n').pop());
    const reports = await Promise.all(recv.map((r) => r.next(30_000)));
    const got = reports.reduce((a, r) => a + r.count, 0);
    return {
      rate: reports.reduce((a, r) => a + (r.secs > 0 ? r.count / r.secs : 0), 0),
      sendRate: sent.secs > 0 ? sent.sent / sent.secs : null,
      delivered: got / (count * receivers),
      cpu: got ? (sent.cpuUs + reports.reduce((a, r) => a + r.cpuUs, 0)) / got : null,
      reports: { sender: sent, receivers: reports },
    };
  } finally {
    for (const r of recv) await r.stop();
  }
}

/** The limit as iperf3 or sockperf (where installed) measure it: { tool, rate } per tool, or []. */
export async function udpToolLimits({ size, port, secs = 2, pin = null }) {
  const out = [];
  const iperf3 = which('iperf3');
  if (iperf3) out.push({ tool: 'iperf3', ...(await iperf3Rate(iperf3, { size, port, secs, pin }).catch((e) => ({ error: e.message }))) });
  const sockperf = which('sockperf');
  if (sockperf) out.push({ tool: 'sockperf', ...(await sockperfRate(sockperf, { size, port, secs, pin }).catch((e) => ({ error: e.message }))) });
  return out;
}

/** iperf3 UDP at no rate limit: datagrams/s the receiver got (packets − lost over the seconds). */
async function iperf3Rate(cmd, { size, port, secs, pin }) {
  const srv = run(cmd, ['-s', '-1', '-p', String(port)], { side: pin ? 0 : null, timeoutMs: (secs + 20) * 1000 });
  await new Promise((r) => setTimeout(r, 300));
  const c = await run(cmd, ['-c', '127.0.0.1', '-p', String(port), '-u', '-b', '0', '-l', String(size), '-t', String(secs), '-J'], { side: pin ? 1 : null, timeoutMs: (secs + 20) * 1000 });
  await srv;
  const j = JSON.parse(c.out);
  if (j.error) throw new Error(`iperf3: ${j.error}`);
  // end.sum of a UDP test: the datagrams sent (`packets`, `total_packets` in the first 3.0
  // releases) and those the server did not get (`lost_packets`), over `seconds`.
  const sum = [j.end?.sum, j.end?.sum_received].find((x) => typeof (x?.packets ?? x?.total_packets) === 'number' && x.seconds > 0);
  if (!sum) throw new Error('iperf3: no UDP packet counts in its JSON');
  const sent = sum.packets ?? sum.total_packets;
  return { rate: (sent - (sum.lost_packets ?? 0)) / sum.seconds, sendRate: sent / sum.seconds };
}

/** sockperf throughput: the message rate its client reports. */
async function sockperfRate(cmd, { size, port, secs, pin }) {
  const srv = run(cmd, ['server', '-i', '127.0.0.1', '-p', String(port)], { side: pin ? 0 : null, timeoutMs: (secs + 20) * 1000 });
  await new Promise((r) => setTimeout(r, 300));
  try {
    const c = await run(cmd, ['throughput', '-i', '127.0.0.1', '-p', String(port), '-m', String(size), '-t', String(secs)], { side: pin ? 1 : null, timeoutMs: (secs + 20) * 1000 });
    const m = /Message Rate is (\d+)/.exec(c.out + c.err);
    if (!m) throw new Error(`sockperf: no message rate in its output (exit ${c.code})`);
    return { sendRate: Number(m[1]) };
  } finally {
    srv.kill();
    await srv;
  }
}
