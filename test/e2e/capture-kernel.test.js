// Our RoCE capture and wire against the kernel's, field by field. rping -C 5, udaddy (10
// datagrams of 100 bytes each way) and ib_send_lat -R (1000 iterations) run between two hosts (network namespaces on a veth pair,
// MTU 1500 like the reference VMs' links) over the soft RoCE device with RDMA_PCAP set, while
// tcpdump records the veth. The kernel side is test/fixtures/captures/E-rxe-2vm.pcap: the same
// tools between two VMs running Linux rdma_rxe. Every packet of the exchange is decoded by tshark
// and compared with the kernel's packet at the same place, field by field (IPv4, UDP, BTH, DETH,
// RETH, AETH, immediate data, MAD header, IB CM REQ/REP/RTU/DREQ), host-local numbers (QPNs, PSNs,
// keys, comm IDs, addresses) mapped to their roles; fields that legitimately differ are checked
// on their own terms (capture-compare.js says why for each). The device's capture is also
// compared with tcpdump's record of the wire: it must tell the truth, IPv4 ID and ports included.
// Skips loudly without tshark, tcpdump or network namespaces.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { REPO_ROOT, startCli, describeRun, makeVethPair, waitRoceListening, PS_UDP } from '../lib/tools.js';
import { sleep, until } from '../lib/wait.js';
import { rocePackets, compareExchange, icrcValid, FIELDS, SKIPPED } from '../lib/capture-compare.js';
import { roce } from '../../dist/wire/index.js';
import { netopt } from '../../dist/util/netopt.js';

const KERNEL = fileURLToPath(new URL('../fixtures/captures/E-rxe-2vm.pcap', import.meta.url));
/** The kernel capture's exchanges, by frame number (see test/fixtures/captures/README.md). */
const KERNEL_UDADDY = { from: 1, to: 22 };
const KERNEL_RPING = { from: 4095, to: 4158 };
const KERNEL_SEND_LAT = { from: 41, to: 4094 };
/** perftest's default port (its rdma_cm side channel listens there). */
const PERFTEST_PORT = 18515;
const RPING_PORT = 7174;
/** udaddy's fixed port (udaddy.c, src/cli/udaddy.ts). */
const UDADDY_PORT = 7174;
const cli = (name) => join(REPO_ROOT, 'dist', 'cli', `${name}.js`);

const has = (cmd, arg) => spawnSync(cmd, [arg], { encoding: 'utf8' }).status === 0;
// Without the socket addon the device's IPv4 datagrams carry a kernel-chosen ID and a UDP
// checksum, not rxe's 0 and 0 (docs/capture.md): nothing to compare field by field.
const missing = !has('tshark', '--version')
  ? 'tshark is not installed (apt-get install tshark)'
  : !has('tcpdump', '--version')
    ? 'tcpdump is not installed'
    : typeof netopt()?.setNoCheck !== 'function'
      ? 'the socket addon native/build/netopt.node is not built (npm run build:native)'
      : false;
const veth = missing ? { skip: missing, remove() {} } : makeVethPair('capcmp');
const SKIP = missing || veth.skip;
if (SKIP) process.stderr.write(`\n${'#'.repeat(78)}\n# SKIPPED: RoCE capture vs kernel: ${SKIP}\n${'#'.repeat(78)}\n\n`);
test.after(() => veth.remove());

/** Both ends of the veth pair up (a new veth's carrier comes a moment after `link set up`). */
async function linksUp() {
  const up = (ns, dev) => /state UP/.test(spawnSync('ip', ['-n', ns, 'link', 'show', dev], { encoding: 'utf8' }).stdout);
  await until(() => up(veth.a, 'va') && up(veth.b, 'vb'), 10_000, 'the veth pair to come up', 50);
}

/** Whether something listens on TCP `port` in process `pid`'s network namespace. */
function tcpListening(pid, port) {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')} `;
  return ['tcp', 'tcp6'].some((f) => {
    try {
      return readFileSync(`/proc/${pid}/net/${f}`, 'utf8').split('\n').some((l) => l.includes(hex) && / 0A /.test(l));
    } catch {
      return false;
    }
  });
}

/** The GID index of `ip` (::ffff:a.b.c.d) on soft device `dev` in namespace `ns`. */
function gidIndex(ns, dev, ip) {
  const code = `const { getDeviceList } = await import(${JSON.stringify(join(REPO_ROOT, 'dist', 'index.js'))});
const ctx = getDeviceList().find((d) => d.name === ${JSON.stringify(dev)}).open();
const want = Buffer.from([0,0,0,0,0,0,0,0,0,0,255,255,${ip.split('.').join(',')}]);
let i = 0; while (i < ctx.queryPort(1).gidTblLen && !Buffer.from(ctx.queryGid(1, i)).equals(want)) i++;
console.log(i); process.exit(0);`;
  const r = spawnSync('ip', ['netns', 'exec', ns, process.execPath, '--input-type=module', '-e', code], { encoding: 'utf8', env: { ...process.env, RDMACM_BACKEND: 'soft' } });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim();
}

/** tcpdump on the server's end of the veth pair, writing `file`; `stop()` ends it and waits. */
async function startWire(file) {
  const p = spawn('ip', ['netns', 'exec', veth.a, 'tcpdump', '-i', 'va', '--immediate-mode', '-B', '32768', '-U', '-w', file, 'udp', 'port', String(roce.ROCE_V2_UDP_PORT)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  p.stderr.on('data', (b) => (err += b));
  const closed = new Promise((r) => p.on('close', r));
  await until(() => /listening on/.test(err), 10_000, () => `tcpdump to start: ${err}`, 20);
  let stopped = false;
  return {
    async stop() {
      if (stopped) return err;
      stopped = true;
      // every datagram written: the file has stopped growing (both tools have exited by now)
      let size = -1;
      let still = 0;
      for (let i = 0; i < 50 && still < 3; i++) {
        await sleep(100);
        const now = existsSync(file) ? statSync(file).size : 0;
        still = now === size ? still + 1 : 0;
        size = now;
      }
      p.kill('SIGINT');
      await closed;
      return err;
    },
  };
}

/**
 * Run `tool`'s server on host a and client on host b with RDMA_PCAP and tcpdump on; the client's
 * capture file and the wire's.
 */
async function exchange(tool, port, serverArgs, clientArgs, ps, { clientArgsFor = null } = {}) {
  await linksUp();
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-capcmp-'));
  const wireFile = join(dir, 'wire.pcap');
  const wire = await startWire(wireFile);
  const env = (dev) => ({ RDMACM_BACKEND: 'soft', RDMACM_DEVICE: dev, RDMA_PCAP: join(dir, `${tool}-%p.pcapng`) });
  const srv = startCli(cli(tool), serverArgs, { netns: veth.a, env: env('rxe_va'), timeoutMs: 90_000 });
  try {
    // rdma_cm tools: the service's name on the device; the pingpongs: their TCP exchange port
    if (ps === 'tcp-exchange') await until(() => tcpListening(srv.child.pid, port), 20_000, `${tool} listening on TCP ${port}`, 50);
    else await waitRoceListening(roce.ROCE_V2_UDP_PORT, port, srv.done, 20_000, ps, srv.child.pid);
    const cl = startCli(cli(tool), clientArgsFor ? clientArgsFor() : clientArgs, { netns: veth.b, env: env('rxe_vb'), timeoutMs: 90_000 });
    const c = await cl.done;
    if (c.code !== 0) srv.kill('SIGKILL');
    const s = await srv.done;
    const both = `${describeRun('client', c)}\n${describeRun('server', s)}`;
    assert.equal(c.code, 0, both);
    assert.equal(s.code, 0, both);
    const tcpdumpSays = await wire.stop();
    const [, got, seen] = /(\d+) packets? captured\s+(\d+) packets? received by filter/.exec(tcpdumpSays) ?? [];
    assert.ok(got !== undefined && got === seen, `tcpdump kept every datagram: ${tcpdumpSays}`);
    const files = readdirSync(dir);
    assert.ok(files.includes(`${tool}-${cl.child.pid}.pcapng`), `the client's capture: ${files.join(' ')}`);
    return { dir, ours: join(dir, `${tool}-${cl.child.pid}.pcapng`), wire: wireFile };
  } finally {
    srv.kill('SIGKILL');
    await wire.stop().catch(() => {});
  }
}

/** Field-by-field differences, with the list of fields left out and why, for the message. */
function explain(diffs) {
  return `${diffs.join('\n')}\n(fields compared apart: ${SKIPPED.join('; ')})`;
}

/** The UDP source ports of `pkts`, by QP1 (CM) or not. */
function sourcePorts(pkts) {
  const cm = new Set();
  const data = new Set();
  for (const p of pkts) (p.get('infiniband.bth.destqp') === '0x000001' ? cm : data).add(Number(p.get('udp.srcport')));
  return { cm: [...cm], data: [...data] };
}

/** The IB CM message of a QP1 packet, decoded with our codec (what tshark does not decode). */
function cmOf(p) {
  const payload = Buffer.from(p.get('udp.payload').replaceAll(':', ''), 'hex');
  return roce.decodeCmMad(payload.subarray(roce.GSI_MAD_OFF, payload.length - 4)).msg;
}

/** MAD attribute IDs of a DREQ and a DREP (IBTA table 89). */
const DREQ_ATTR = '0x0015';
const DREP_ATTR = '0x0016';

function withoutTrailingDrep(pkts) {
  const out = [...pkts];
  while (out.length > 0 && out[out.length - 1].get('infiniband.mad.attributeid') === DREP_ATTR) out.pop();
  return out;
}

/** The checks common to both exchanges: ours vs the wire (exact), ours and the wire vs rxe. */
function compareAll(run, kernelRange, { dropTrailingDrep = true } = {}) {
  // rping: the kernel's capture ends with the client's DREQ; the server's DREP may or may not
  // reach the client's capture before it exits (rping does not wait for it), while tcpdump sees
  // it: a trailing DREP is left out of every list.
  const trim = dropTrailingDrep ? withoutTrailingDrep : (x) => x;
  return compareAllWith(run, trim(rocePackets(KERNEL, kernelRange)), trim);
}

/** {@link compareAll} against the kernel's packets `kernel`. */
function compareAllWith(run, kernel, trim = (x) => x) {
  const ours = trim(rocePackets(run.ours));
  const wire = trim(rocePackets(run.wire));
  assert.ok(kernel.length > 0 && ours.length > 0);
  // the ICRC of every packet fits its captured IPv4/UDP header
  for (const [what, pkts] of [['rxe', kernel], ['ours', ours], ['wire', wire]]) {
    const bad = pkts.filter((p) => !icrcValid(p)).map((p) => p.get('frame.number'));
    assert.deepEqual(bad, [], `${what}: frames whose ICRC does not fit the captured header`);
  }
  // the device's capture is the wire: every field, the IPv4 ID and the UDP ports included
  assert.equal(wire.length, ours.length, 'every datagram the client\'s capture holds crossed the veth');
  // Each sender's datagrams in the same order (the two directions may interleave differently at
  // the client, where the capture is made, and at the server's end of the veth, where tcpdump
  // is). A received datagram's TTL is not known to a socket: the capture writes 64 (capture.md).
  const client = ours[0].get('ip.src');
  for (const from of new Set(ours.map((p) => p.get('ip.src')))) {
    const a = ours.filter((p) => p.get('ip.src') === from);
    const b = wire.filter((p) => p.get('ip.src') === from);
    assert.equal(a.length, b.length, `datagrams from ${from}: in the capture and on the wire`);
    for (let i = 0; i < a.length; i++) {
      for (const [name] of FIELDS) {
        if (name === 'ip.checksum') continue;
        if (name === 'ip.ttl' && from !== client) {
          assert.equal(a[i].get(name), '64', `${from} #${i}: a received datagram's TTL is written as 64`);
          continue;
        }
        assert.equal(a[i].get(name), b[i].get(name), `${from} #${i}: ${name} in the capture and on the wire`);
      }
      assert.equal(a[i].get('udp.payload'), b[i].get('udp.payload'), `${from} #${i}: the datagram`);
    }
  }
  return { kernel, ours, wire };
}

/**
 * IPv4/UDP fields whose values differ from rxe's for a reason: what each side puts there.
 * `kernelSent`: which of the kernel capture's packets rxe sent (all of E-rxe-2vm's).
 */
function checkHeaderDifferences(kernelAll, ours, kernelSent = () => true) {
  const kernel = kernelAll.filter(kernelSent);
  assert.ok(kernel.length > 0);
  // rxe: a hashed per-destination counter; ours: 0 (IP_PMTUDISC_PROBE, the ID the ICRC covers)
  assert.ok(kernel.every((p) => p.get('ip.id') !== '0x0000'), 'rxe numbers its datagrams');
  assert.ok(ours.every((p) => p.get('ip.id') === '0x0000'), 'ours leave with ID 0');
  // rxe: UDP source port per QP; ours: the device's one socket (4791)
  const k = sourcePorts(kernel);
  if (k.cm.length > 0) assert.deepEqual(k.cm, [roce.roceUdpSrcPort(roce.GSI_QPN)], 'rxe: QP1 sends from the hash of its QPN');
  assert.ok(k.data.every((x) => x >= 0xc000 && x <= 0xffff), 'rxe: data ports in 0xC000..0xFFFF');
  const o = sourcePorts(ours);
  assert.deepEqual([...new Set([...o.cm, ...o.data])], [roce.ROCE_V2_UDP_PORT], 'ours: every datagram from the device\'s socket');
}

test('rping -C 5 over soft RoCE between two hosts: capture and wire field by field against rxe\'s (E-rxe-2vm)', { skip: SKIP, timeout: 150_000 }, async () => {
  const args = ['-a', veth.ipA, '-p', String(RPING_PORT), '-C', '5'];
  const run = await exchange('rping', RPING_PORT, ['-s', ...args], ['-c', ...args, '-I', veth.ipB], undefined);
  try {
    const { kernel, ours } = compareAll(run, KERNEL_RPING);
    assert.equal(cmOf(kernel[kernel.length - 1]).kind, 'DREQ');
    const diffs = compareExchange(ours, kernel);
    assert.deepEqual(diffs, [], explain(diffs));
    checkHeaderDifferences(kernel, ours);
    // rxe's RC data leaves from the port of the REQ's flow label, itself cma's hash of the ports
    const reqK = cmOf(kernel[0]);
    const reqO = cmOf(ours[0]);
    for (const [q, who] of [[reqK, 'rxe'], [reqO, 'ours']]) {
      const h = roce.decodeCmaHeader(q.privateData);
      assert.equal(q.primaryPath.flowLabel, roce.cmaRoceFlowLabel(h.srcPort, RPING_PORT), `${who}: REQ flow label`);
      assert.equal(q.primaryPath.packetRate, 0, `${who}: REQ packet rate`);
    }
    assert.deepEqual(sourcePorts(kernel).data, [roce.rdmaFlowLabelToUdpSport(reqK.primaryPath.flowLabel)]);
    // AETH: rxe's credit count is always 31 (unknown); ours counts the receive WQEs posted
    const credits = (pkts) => pkts.filter((p) => p.get('infiniband.aeth.syndrome.opcode') === '0').map((p) => Number(p.get('infiniband.aeth.syndrome.credit_count')));
    assert.ok(credits(kernel).every((c) => c === roce.AETH_CREDIT_INVALID));
    assert.ok(credits(ours).length > 0 && credits(ours).every((c) => c >= 0 && c < roce.AETH_CREDIT_INVALID), `ours: ${credits(ours)}`);
  } finally {
    rmSync(run.dir, { recursive: true, force: true });
  }
});

test('udaddy (SIDR, 10 UD SEND with immediate each way) over soft RoCE between two hosts: field by field against rxe\'s', { skip: SKIP, timeout: 150_000 }, async () => {
  const run = await exchange('udaddy', UDADDY_PORT, ['-b', veth.ipA], ['-s', veth.ipA, '-b', veth.ipB], PS_UDP);
  try {
    const { kernel, ours } = compareAll(run, KERNEL_UDADDY);
    const diffs = compareExchange(ours, kernel);
    assert.deepEqual(diffs, [], explain(diffs));
    checkHeaderDifferences(kernel, ours);
    // tshark has no SIDR fields: SIDR_REQ and SIDR_REP through our codec, roles mapped
    const sidr = (pkts) => {
      const rq = cmOf(pkts[0]);
      const rp = cmOf(pkts[1]);
      const h = roce.decodeCmaHeader(rq.privateData);
      return {
        kinds: [rq.kind, rp.kind],
        serviceId: [rq.serviceId, rp.serviceId],
        requestIdEchoed: rp.requestId === rq.requestId,
        pkey: rq.pkey,
        rep: [rp.status, rp.addInfoLength, rp.vendorId, rp.qkey],
        qpnIsTheSender: rp.qpn === Number(pkts[2 + pkts.slice(2).findIndex((p) => p.get('ip.src') === pkts[1].get('ip.src'))].get('infiniband.deth.srcqp')),
        cma: [h.version, h.ipVersion, rq.privateData.subarray(36).every((x) => x === 0)],
      };
    };
    assert.deepEqual(sidr(ours), sidr(kernel));
  } finally {
    rmSync(run.dir, { recursive: true, force: true });
  }
});

test('ib_send_lat -R (rdma_cm side channel, 1000 ping-pongs) over soft RoCE between two hosts: field by field against rxe\'s', { skip: SKIP, timeout: 200_000 }, async () => {
  const run = await exchange('ib_send_lat', PERFTEST_PORT, ['-R'], ['-R', veth.ipA], undefined);
  try {
    const { kernel, ours } = compareAll(run, KERNEL_SEND_LAT, { dropTrailingDrep: false });
    // The teardown (DREQ and DREP) goes otherwise: our client waits for the server to end the
    // side channel (src/cli/perftest/cm-channel.ts closeAfterPeer), and when both ends send a
    // DREQ for one connection each answers the other's. Everything else is compared field by
    // field; the teardown, connection by connection.
    const isTeardown = (p) => p.get('infiniband.mad.attributeid') === DREQ_ATTR || p.get('infiniband.mad.attributeid') === DREP_ATTR;
    const diffs = compareExchange(ours.filter((p) => !isTeardown(p)), kernel.filter((p) => !isTeardown(p)));
    assert.deepEqual(diffs, [], explain(diffs));
    checkHeaderDifferences(kernel, ours);
    const teardown = (pkts) => {
      const msgs = pkts.filter(isTeardown).map(cmOf);
      const dreqs = msgs.filter((m) => m.kind === 'DREQ');
      const answered = dreqs.every((q) => msgs.some((r) => r.kind === 'DREP' && r.localCommId === q.remoteCommId && r.remoteCommId === q.localCommId));
      // the connections closed: their comm ID pairs, either way round
      const conns = new Set(dreqs.map((q) => [q.localCommId, q.remoteCommId].sort().join('/')));
      return { answered, connections: conns.size };
    };
    assert.deepEqual(teardown(ours), { answered: true, connections: 2 });
    assert.deepEqual(teardown(kernel), { answered: true, connections: 2 });
  } finally {
    rmSync(run.dir, { recursive: true, force: true });
  }
});

// F-rxe-pingpong.pcap: rdma-core's ibv_rc_pingpong and ibv_ud_pingpong serving on a VM's rxe0
// (10.77.0.3), our tools the clients (10.77.0.1): the kernel server's packets compared with our
// server's in order, field by field.
const PINGPONG = fileURLToPath(new URL('../fixtures/captures/F-rxe-pingpong.pcap', import.meta.url));
const PP_PORT = 18515;
const PP_KERNEL = '10.77.0.3';

for (const [tool, extra, range, what, prefix] of [
  ['ibv_rc_pingpong', [], { from: 1, to: 85 }, 'RC, 4096-byte round trips (SEND first/middle/last at path MTU 1024)', true],
  ['ibv_ud_pingpong', ['-s', '512'], { from: 106, to: 125 }, 'UD, 10 round trips of 512 bytes', false],
]) {
  test(`${tool} (${what}) over soft RoCE between two hosts: the server's packets field by field against rxe's (F-rxe-pingpong)`, { skip: SKIP, timeout: 150_000 }, async () => {
    const base = ['-n', '10', ...extra];
    const run = await exchange(tool, PP_PORT, ['-d', 'rxe_va', '-g', gidIndex(veth.a, 'rxe_va', veth.ipA), ...base], null, 'tcp-exchange', {
      clientArgsFor: () => ['-d', 'rxe_vb', '-g', gidIndex(veth.b, 'rxe_vb', veth.ipB), ...base, veth.ipA],
    });
    try {
      const kernelAll = rocePackets(PINGPONG, range);
      // the wire's record: the TTL of the server's datagrams too (the client's capture cannot know it)
      const { ours, wire } = compareAllWith(run, kernelAll);
      // the client's packets in the fixture are our tool's, not a reference: the server's only
      const diffs = compareExchange(wire, kernelAll, { prefix, senders: ['host#1'] });
      assert.deepEqual(diffs, [], explain(diffs));
      checkHeaderDifferences(kernelAll, ours, (p) => p.get('ip.src') === PP_KERNEL);
    } finally {
      rmSync(run.dir, { recursive: true, force: true });
    }
  });
}
