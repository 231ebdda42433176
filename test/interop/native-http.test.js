// HTTP over rsockets through the native backend in the reference VM: a node:http server of ours
// (rdmacm/http createHttpServer) runs inside the guest with RDMACM_BACKEND=native, on the kernel's
// rxe0 through rdma-core's librdmacm and libibverbs, and two clients of ours reach it:
//   G  a node:http client in the guest, also on the native backend (RAgent over rxe0);
//   H  a node:http client on the host, on our soft RoCE device (rxe_rvbr0 in the `refvm` netns),
//      whose RC connection meets the kernel's rxe on the wire;
//   U  an undici Client on the host (rdmacm/http's connector, two requests pipelined), the same way.
// Each client: five GETs and a 1 MiB POST echoed back, all over one keep-alive connection
// (test/interop/lib/http-peer.mjs). The server reports the devices it saw (the kernel's only),
// the connections it accepted (three: one per client) and every request served.
//
// Needs, besides the VM: native/build/rdmacm.node (npm run build:native).
// Env: REFVM_VM (the VM slot, default 0).
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { withGuest, requireRefvm, requireBuilt, guestIp, HOST_IP, REPO_ROOT, vmSlot } from './lib/refvm.js';

const ADDON = join(REPO_ROOT, 'native', 'build', 'rdmacm.node');
const PEER = join(REPO_ROOT, 'test', 'interop', 'lib', 'http-peer.mjs');
const VM = vmSlot(0);
const PORT = 7820;
const HOST_ENV = { RDMACM_BACKEND: 'soft', RDMACM_DEVICE: 'rxe_rvbr0', RDMACM_ROCE_PORT: '', PEER_DEADLINE_SEC: '280' };

const built = (t) => requireBuilt(t, [ADDON, join(REPO_ROOT, 'dist', 'http', 'index.js')], 'npm run build; npm run build:native needs libibverbs-dev and librdmacm-dev');

// The server starts first and runs until the host says both clients are done (http-stop).
const PEER_CMD = `env RDMACM_BACKEND=native PEER_DEADLINE_SEC=900 $H/node /mnt/src/test/interop/lib/http-peer.mjs /mnt/src`;
const job = `
IP=$REFVM_IP
mark ready
gstart server 1000 env READY_FILE=$H/http-up STOP_FILE=$H/http-stop ${PEER_CMD} server $IP ${PORT}; sp=$GPID
if waitfile $H/http-up 400; then gtool guest-client 400 ${PEER_CMD} client $IP ${PORT} guest
else glog "the http server did not come up"; putrc guest-client 250; fi
mark guest-client-done
waitfile $H/http-stop 700 || glog "no stop from the host"
gwait server $sp
mark finished
`;

const tailOf = (s, n = 12) => (s || '').trimEnd().split('\n').slice(-n).join('\n');
const desc = (who, r) => `${who}: exit ${r.rc ?? r.code}\n  stderr: ${tailOf(r.err ?? r.stderr)}\n  stdout: ${tailOf(r.out ?? r.stdout)}`;
const lastJson = (s) => JSON.parse((s || '').trim().split('\n').filter((l) => l.startsWith('{')).at(-1) ?? 'null');

test("native backend on the kernel's rxe0: node:http served over rsockets, clients in the guest (native) and on the host (soft RoCE)", { timeout: 1_800_000 }, async (t) => {
  if (!(await requireRefvm(t)) || !built(t)) return;
  let host = null;
  let hostUndici = null;
  const res = await withGuest({ name: 'native-http', rdma: 'rxe', vm: VM, job, timeoutSec: 1500, src: REPO_ROOT, node: true }, async (ctx) => {
    await ctx.waitFile('guest-client-done', 1_000_000);
    if (ctx.result('server').rc === null) {
      host = await ctx.hostRun(process.execPath, [PEER, REPO_ROOT, 'client', guestIp(VM), String(PORT), 'host'], { timeoutMs: 300_000, env: HOST_ENV });
      hostUndici = await ctx.hostRun(process.execPath, [PEER, REPO_ROOT, 'undici-client', guestIp(VM), String(PORT), 'undici'], { timeoutMs: 300_000, env: HOST_ENV });
    }
    ctx.touch('http-stop');
    await ctx.waitFile('finished', 300_000);
  });
  t.diagnostic(`VM: ready after ${(res.bootMs / 1000).toFixed(1)} s, total ${(res.wallMs / 1000).toFixed(1)} s; ${res.jobDir}`);
  const result = (n) => {
    const rc = res.read(`${n}.rc`);
    return { rc: rc === null ? null : Number(rc.trim()), out: res.read(`${n}.out`) ?? '', err: res.read(`${n}.err`) ?? '' };
  };
  const srv = result('server');
  const gcli = result('guest-client');

  const checkClient = (who, r, rc, out) => {
    const j = lastJson(out);
    assert.equal(rc, 0, `${desc(`${who} client`, r)}\n${desc('server', srv)}`);
    assert.deepEqual(j.statuses, [200, 200, 200, 200, 200]);
    assert.deepEqual(j.bodies, Array(5).fill(`hello ${who}`));
    assert.equal(j.connections, 1, 'one keep-alive connection served every request');
    assert.deepEqual(j.echo, { status: 200, length: 1 << 20, shaMatches: true });
  };

  await t.test('G: a node:http client in the guest on the native backend: 5 GETs and a 1 MiB echo over one keep-alive rsocket', () => {
    checkClient('guest', gcli, gcli.rc, gcli.out);
  });

  await t.test('H: a node:http client on the host over our soft RoCE device, against the server on the kernel\'s rxe', () => {
    assert.ok(host, `the host client did not run (server exit ${srv.rc})\n${desc('server', srv)}`);
    checkClient('host', host, host.code, host.stdout);
  });

  await t.test('U: an undici Client on the host over our soft RoCE device (rdmacm/http rsConnector, pipelining 2), against the same server', () => {
    assert.ok(hostUndici, `the undici client did not run (server exit ${srv.rc})\n${desc('server', srv)}`);
    checkClient('undici', hostUndici, hostUndici.code, hostUndici.stdout);
  });

  await t.test('the server ran on the kernel\'s device only, accepted one rsocket per client and served every request', () => {
    assert.equal(srv.rc, 0, desc('server', srv));
    const j = lastJson(srv.out);
    assert.deepEqual(j.devices, ['rxe0'], 'RDMACM_BACKEND=native: the kernel\'s devices only');
    assert.equal(j.accepted, 3);
    assert.deepEqual(j.sockets, ['RSocket']);
    const from = (ip) => j.served.filter((l) => l.endsWith(`from ${ip}`));
    assert.equal(from(guestIp(VM)).length, 6, j.served.join('\n'));
    assert.equal(from(HOST_IP).length, 12, j.served.join('\n'));
    assert.equal(j.served.length, 18, j.served.join('\n'));
  });
  assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
});
