// Who may share a soft RoCE device's UDP port (docs/security.md, *Local users*), in a network
// namespace this test makes, with a process of `nobody` beside root's (local-users-peer.js):
// - nobody holding every QPN block name of its own namespace does not keep root from creating QPs;
// - a frame nobody hands to root's process over the block's Unix socket is taken only when it
//   claims a source address of this host (what nobody could send over UDP itself): one claiming a
//   remote address is dropped and counted in fwd_forged_drop, and never reaches the QP;
// - two processes of nobody share the device: a frame from its own user is taken whatever its source;
// - root's QP sends to nobody's QP on this host (its block found under nobody's name).
// Skipped (with the reason) where the runner is not root, cannot make a namespace, or lacks the
// netopt addon (which reads the peer's credentials).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { netopt } from '../../../../dist/util/netopt.js';

const PEER = fileURLToPath(new URL('./local-users-peer.js', import.meta.url));

function skipReason() {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'needs root (to make a network namespace and run a process as nobody)';
  if (!netopt()?.peerCred) return 'the netopt addon (SO_PEERCRED) is not built';
  const id = spawnSync('id', ['-u', 'nobody'], { encoding: 'utf8' });
  if (id.status !== 0) return 'no user nobody';
  const ns = spawnSync('unshare', ['-n', 'true']);
  if (ns.status !== 0) return `unshare -n fails here (${ns.stderr?.toString().trim() || ns.error?.message})`;
  const uid = Number(id.stdout.trim());
  const gid = Number(spawnSync('id', ['-g', 'nobody'], { encoding: 'utf8' }).stdout.trim());
  const read = spawnSync(process.execPath, ['-e', `import(${JSON.stringify(new URL('../../../../dist/index.js', import.meta.url).href)})`], { uid, gid });
  if (read.status !== 0) return 'nobody cannot read this checkout';
  return null;
}

const why = skipReason();

test('local users: nobody cannot starve root of QPN blocks, forge a remote source into root\'s QP, and shares the device with its own processes', { skip: why ?? false, timeout: 120000 }, async () => {
  const uid = spawnSync('id', ['-u', 'nobody'], { encoding: 'utf8' }).stdout.trim();
  const gid = spawnSync('id', ['-g', 'nobody'], { encoding: 'utf8' }).stdout.trim();
  const port = 20000 + Math.floor(Math.random() * 30000);
  const c = spawn('unshare', ['-n', '--', process.execPath, PEER, 'root', uid, gid], { env: { ...process.env, RDMACM_ROCE_PORT: String(port) }, stdio: ['ignore', 'pipe', 'inherit'] });
  let text = '';
  c.stdout.on('data', (d) => (text += d));
  const code = await new Promise((r) => c.on('exit', r));
  const r = JSON.parse(text.trim().split('\n').pop());
  assert.equal(code, 0, text);
  assert.equal(r.squatted, 16382, 'nobody held every block name of its namespace');
  assert.ok(r.qpn > 0, 'root still created its QP');
  assert.deepEqual(r.got, ['forge: local'], 'only the frame from a local address reached root\'s QP');
  assert.equal(r.fwd_forged_drop, 1, 'the remote claim was dropped and counted');
  assert.equal(r.fwd_rcvd, 2);
  assert.deepEqual(r.same.got.sort(), ['frame: local', 'frame: remote', 'from root'], 'a process of its own user may hand over any source; root reaches another user\'s QP');
  assert.equal(r.same.fwd_forged_drop, 0);
  assert.deepEqual(r.exits, [0, 0, 0]);
});
