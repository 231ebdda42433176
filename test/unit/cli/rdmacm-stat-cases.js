// Run by rdmacm-stat.test.js in a network namespace of its own (the tool lists every process of
// the user in its namespace: test files running beside it would be listed too).
// rdmacm-stat in a second process: the counters and resources that processes using the soft
// devices serve (stat-holder.js holds known objects on siw_lo and rxe_lo), its output lines and
// exit codes, a process that never answers (skipped), and — as root — a reader of another user
// (nobody), who is shown nothing and whose direct query is refused.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { REPO_ROOT, runCli, describeRun } from '../../lib/tools.js';
import { netopt } from '../../../dist/util/netopt.js';

const TOOL = join(REPO_ROOT, 'dist', 'cli', 'rdmacm-stat.js');
const HOLDER = fileURLToPath(new URL('../../lib/stat-holder.js', import.meta.url));
const N = 5;
const S = 64;

/** Start a stat-holder in `mode`; resolves with its first line (parsed) and the child. */
function holder(mode, args, env = {}) {
  const c = spawn(process.execPath, [HOLDER, mode, ...args], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, RDMACM_BACKEND: 'soft', ...env } });
  return new Promise((resolve, reject) => {
    let text = '';
    const t = setTimeout(() => {
      c.kill('SIGKILL');
      reject(new Error(`stat-holder ${mode} not ready`));
    }, 30_000);
    c.stdout.on('data', (b) => {
      text += b;
      if (text.includes('\n')) {
        clearTimeout(t);
        resolve({ info: JSON.parse(text.slice(0, text.indexOf('\n'))), child: c });
      }
    });
    c.on('exit', (code) => reject(new Error(`stat-holder ${mode} exited ${code}`)));
  });
}

const held = {};
before(async () => {
  held.siw = await holder('hold', [String(N), String(S)], { RDMACM_DEVICE: 'siw_lo' });
  held.rxe = await holder('hold', [String(N), String(S)], { RDMACM_DEVICE: 'rxe_lo' });
});
after(() => {
  for (const h of Object.values(held)) h.child.stdin.end();
});

const tool = (args, opts = {}) => runCli(TOOL, args, { timeoutMs: 20_000, ...opts });

test('resource show: one summary line per device, counting the holders\' objects', async () => {
  const r = await tool(['resource', 'show']);
  assert.equal(r.code, 0, describeRun('rdmacm-stat resource show', r));
  // Each holder: a PD, 4 CQs (two per id), 2 QPs, 3 CM ids, 3 MRs.
  assert.deepEqual(r.stdout.split('\n').filter(Boolean), ['0: rxe_lo: pd 1 cq 4 qp 2 cm_id 3 mr 3', '1: siw_lo: pd 1 cq 4 qp 2 cm_id 3 mr 3']);
  assert.equal(r.stderr, '');
});

test('resource show qp: link, QP numbers, type and state; MSNs on iWARP, PSNs on RoCE', async () => {
  const r = await tool(['resource', 'show', 'qp']);
  assert.equal(r.code, 0, describeRun('rdmacm-stat resource show qp', r));
  const lines = r.stdout.split('\n').filter(Boolean);
  assert.equal(lines.length, 4, r.stdout);
  const [sa, sb] = held.siw.info.lqpn;
  const pidSiw = held.siw.info.pid;
  assert.match(r.stdout, new RegExp(`^link siw_lo/1 lqpn ${sa} type RC state RTS sq-msn ${N} rq-msn 1 read-msn 0 ird-msn 1 dst-addr 127\\.0\\.0\\.1:\\d+ src-addr 127\\.0\\.0\\.1:\\d+ pdn 1 pid ${pidSiw} comm stat-holder$`, 'm'));
  assert.match(r.stdout, new RegExp(`^link siw_lo/1 lqpn ${sb} type RC state RTS sq-msn 0 rq-msn ${N + 1} `, 'm'));
  const [ra, rb] = held.rxe.info.lqpn;
  assert.match(r.stdout, new RegExp(`^link rxe_lo/1 lqpn ${ra} rqpn ${rb} type RC state RTS rq-psn \\d+ sq-psn \\d+ dst-addr 127\\.0\\.0\\.1 src-addr 127\\.0\\.0\\.1 pdn 1 pid ${held.rxe.info.pid} comm stat-holder$`, 'm'));
  // Filters: one device, one process.
  const only = await tool(['resource', 'show', 'qp', 'link', 'rxe_lo/1']);
  assert.equal(only.stdout.split('\n').filter(Boolean).length, 2);
  assert.ok(only.stdout.split('\n').filter(Boolean).every((l) => l.startsWith('link rxe_lo/1 ')));
  const none = await tool(['resource', 'show', 'qp', 'pid', '1']);
  assert.equal(none.code, 0);
  assert.equal(none.stdout, '');
});

test('resource show mr/cq/pd/cm_id -j: the keys rdma -j gives, never memory', async () => {
  const mr = JSON.parse((await tool(['-j', 'resource', 'show', 'mr', 'dev', 'siw_lo'])).stdout);
  assert.equal(mr.length, 3);
  for (const m of mr) assert.deepEqual(Object.keys(m).sort(), ['access', 'comm', 'ifname', 'lkey', 'mrlen', 'mrn', 'pdn', 'pid', 'rkey']);
  const big = mr.find((m) => m.mrlen === 4096);
  assert.deepEqual(big.access, ['LOCAL_WRITE', 'REMOTE_READ']);
  assert.match(big.rkey, /^[0-9a-f]+$/, 'hex digits, as rdma -j gives a key');
  const text = (await tool(['resource', 'show', 'mr', 'dev', 'siw_lo'])).stdout;
  assert.ok(text.includes(` rkey 0x${big.rkey} lkey 0x${big.lkey} mrlen 4096 `), `the text view writes keys as rdma does: ${text}`);
  const cq = JSON.parse((await tool(['-j', 'resource', 'show', 'cq', 'dev', 'rxe_lo'])).stdout);
  assert.equal(cq.length, 4);
  assert.ok(cq.every((c) => c.users === 1 && c.cqe >= 1));
  const pd = JSON.parse((await tool(['-j', 'res', 'show', 'pd'])).stdout);
  assert.deepEqual(pd.map((p) => [p.ifname, p.users]).sort(), [['rxe_lo', 5], ['siw_lo', 5]]);
  const ids = JSON.parse((await tool(['-j', 'resource', 'show', 'cm_id', 'link', 'siw_lo/1'])).stdout);
  assert.deepEqual(ids.map((i) => i.state).sort(), ['CONNECT', 'CONNECT', 'LISTEN']);
  assert.ok(ids.every((i) => i.ps === 'TCP' && /^127\.0\.0\.1:\d+$/.test(i['src-addr'])));
});

test('statistic show: one line per process and device; -j: the counters by name', async () => {
  const r = await tool(['statistic', 'show']);
  assert.equal(r.code, 0, describeRun('rdmacm-stat statistic show', r));
  const lines = r.stdout.split('\n').filter(Boolean);
  assert.equal(lines.length, 2);
  assert.match(lines.find((l) => l.startsWith('link siw_lo/1')), new RegExp(`^link siw_lo/1 pid ${held.siw.info.pid} comm stat-holder iwOutRdmaSends ${N} iwOutRdmaWrites 0 iwOutRdmaReads 0 iwInRdmaSends ${N} iwInRdmaWrites 0 `));
  const j = JSON.parse((await tool(['-j', 'stat', 'show', 'link', 'rxe_lo/1'])).stdout);
  assert.equal(j.length, 1);
  assert.equal(j[0].pid, held.rxe.info.pid);
  assert.equal(j[0].rdma_sends, N);
  assert.equal(j[0].rdma_recvs, N);
  const s = JSON.parse((await tool(['-j', 'statistic', 'show', 'link', 'siw_lo'])).stdout)[0];
  assert.equal(s.iwInRdmaSends, N);
  // Each Send is one FPDU of 20 + S + 4 bytes (S a multiple of 4); the RTR Write is one of 20.
  assert.equal(s.mpaOutOctets, N * (20 + S + 4) + 20);
});

test('usage: help exits 0; an unknown object, option or parameter exits 1 with rdma\'s message', async () => {
  const h = await tool(['help']);
  assert.equal(h.code, 0);
  assert.match(h.stdout, /^Usage: rdmacm-stat /);
  const cases = [
    [['foo'], 'Object "foo" is unknown, try "rdmacm-stat help".\n'],
    [['-x', 'res'], 'Option "-x" is unknown, try "rdmacm-stat help".\n'],
    [['resource', 'show', 'qp', 'link'], 'Command line is not complete after "link".\n'],
    [['resource', 'show', 'qp', 'colour', 'red'], "Unknown parameter 'colour'.\n"],
    [['statistic', 'show', 'link', 'siw_lo/x'], 'Wrong port value "siw_lo/x".\n'],
  ];
  for (const [args, msg] of cases) {
    const r = await tool(args);
    assert.equal(r.code, 1, describeRun(args.join(' '), r));
    assert.equal(r.stderr, msg);
    assert.equal(r.stdout, '');
  }
  const bare = await tool([]);
  assert.equal(bare.code, 1);
});

test('a process that does not answer is skipped within the timeout; -d says so', async () => {
  const mute = await holder('mute', []);
  try {
    const r = await tool(['-d', 'resource', 'show']);
    assert.equal(r.code, 0, describeRun('rdmacm-stat -d resource show', r));
    assert.ok(r.ms < 8000, `${r.ms} ms`);
    assert.match(r.stderr, new RegExp(`^pid ${mute.info.pid} skipped: timeout$`, 'm'));
    assert.equal(r.stdout.split('\n').filter(Boolean).length, 2);
  } finally {
    mute.child.stdin.end();
  }
});

function nobody() {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return { skip: 'needs root (to run the reader as nobody)' };
  if (!netopt()?.peerCred) return { skip: 'the netopt addon (SO_PEERCRED) is not built' };
  const id = spawnSync('id', ['-u', 'nobody'], { encoding: 'utf8' });
  if (id.status !== 0) return { skip: 'no user nobody' };
  const uid = Number(id.stdout.trim());
  const gid = Number(spawnSync('id', ['-g', 'nobody'], { encoding: 'utf8' }).stdout.trim());
  const read = spawnSync(process.execPath, [TOOL, 'help'], { uid, gid });
  if (read.status !== 0) return { skip: 'nobody cannot read this checkout' };
  return { uid, gid };
}

const who = nobody();
test('another user: the tool run as nobody shows none of root\'s processes, and a direct query is refused', { skip: who.skip ?? false }, () => {
  const run = (args) => spawnSync(process.execPath, args, { uid: who.uid, gid: who.gid, encoding: 'utf8', timeout: 20_000 });
  const r = run([TOOL, '-d', 'resource', 'show']);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, '');
  assert.match(r.stderr, new RegExp(`^pid ${held.siw.info.pid} skipped: other-user$`, 'm'));
  const s = run([TOOL, 'statistic', 'show']);
  assert.equal(s.status, 0);
  assert.equal(s.stdout, '');
  const ask = run([HOLDER, 'ask', String(held.rxe.info.pid)]);
  assert.equal(ask.stdout, '{"v":1,"error":"EPERM"}\n');
});
