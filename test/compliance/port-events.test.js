// Port and device events of every soft device (one whose port follows a network interface the
// package watches): in a network namespace of its own, the device bound to one end of a veth
// pair sees its interface lose its carrier, go down and up, gain and lose an address, change its
// hardware address and be deleted (test/lib/port-scenario.js), and must report what the kernel's
// driver reports — rxe_net.c rxe_notify, siw_main.c siw_netdev_event, roce_gid_mgmt.c, uverbs'
// DEVICE_FATAL, cma.c's ADDR_CHANGE and DEVICE_REMOVAL — each once, in order; its port state,
// phys_state and GID table following; a device that is down refusing new ids; a listener on
// another device surviving. What differs between device families is told by the device's
// transport type (iWARP ports ignore the carrier and have the MAC as their one GID).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { getDeviceList, TransportType, PortState, WcStatus } from '../../dist/index.js';
import { getProvider } from '../../dist/verbs/provider.js';

const SCENARIO = fileURLToPath(new URL('../lib/port-scenario.js', import.meta.url));
const PHYS = { POLLING: 2, DISABLED: 3, LINK_UP: 5 };

/** The providers of the soft devices: those whose ports follow an interface. */
const providers = [...new Set(getDeviceList().map((d) => d.provider))].filter((p) => getProvider(p)?.netdevPolicy !== undefined);

/**
 * Run the scenario for `provider` in a new network (and mount) namespace; `sysfs`: with a sysfs
 * of that namespace mounted. Resolves to the scenario's report, or `{ skip }` when the namespace
 * or its interfaces cannot be made here.
 */
function runScenario(provider, sysfs) {
  const prep = sysfs ? 'mount -t sysfs sysfs /sys || exit 77; ' : '';
  const script = `${prep}ip link set lo up || exit 77; ip link add rvprobe type veth peer name rvprobe1 || exit 77; ip link del rvprobe; exec "$0" "$1" "$2"`;
  const args = ['-n', ...(sysfs ? ['-m'] : []), 'sh', '-c', script, process.execPath, SCENARIO, provider];
  return new Promise((resolve) => {
    const c = spawn('unshare', args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RDMACM_BACKEND: 'soft' } });
    let o = '';
    let e = '';
    const kill = setTimeout(() => c.kill('SIGKILL'), 90_000);
    c.stdout.on('data', (d) => (o += d));
    c.stderr.on('data', (d) => (e += d));
    c.on('error', (err) => resolve({ skip: String(err) }));
    c.on('close', (code) => {
      clearTimeout(kill);
      if (code === 77 || (code !== 0 && o === '' && /unshare|Operation not permitted|RTNETLINK/.test(e))) resolve({ skip: e.trim().split('\n')[0] || `exit ${code}` });
      else if (code !== 0) resolve({ error: `scenario exited ${code}: ${e.trim()}` });
      else resolve(JSON.parse(o));
    });
  });
}

const stepOf = (r, name) => {
  const s = r.steps.find((x) => x.step === name);
  assert.ok(s, `step ${name}`);
  return s;
};
const IPV4_GID = (a) => `00000000000000000000ffff${a.split('.').map((x) => Number(x).toString(16).padStart(2, '0')).join('')}`;

for (const provider of providers) {
  for (const sysfs of [true, false]) {
    const mode = sysfs ? 'sysfs of the namespace' : 'no sysfs of the namespace (carrier not readable)';
    test(`${provider}: port, GID and CM events follow the interface (${mode})`, { timeout: 120_000 }, async (t) => {
      const r = await runScenario(provider, sysfs);
      if (r.skip !== undefined) {
        t.diagnostic(`SKIPPED: cannot make a network namespace with veth interfaces here: ${r.skip}`);
        t.skip(`cannot make a network namespace with veth interfaces (needs CAP_NET_ADMIN / CAP_SYS_ADMIN): ${r.skip}`);
        return;
      }
      assert.equal(r.error, undefined, r.error);
      const iwarp = r.transport === TransportType.IWARP;
      // Without the namespace's sysfs the carrier cannot be told from the admin state: an
      // interface is up while it runs.
      const followsCarrier = !iwarp || !sysfs;
      assert.deepEqual(r.start.port, { state: PortState.ACTIVE, physState: PHYS.LINK_UP });
      assert.equal(r.start.qp, 'RTS');

      const peerDown = stepOf(r, 'peer down');
      const peerUp = stepOf(r, 'peer up');
      if (followsCarrier) {
        // rxe_notify NETDEV_CHANGE → rxe_set_port_state: no carrier, port down; rxe_query_port:
        // POLLING while the interface is up.
        assert.deepEqual(peerDown.async, ['PORT_ERR']);
        assert.equal(peerDown.port.state, PortState.DOWN);
        if (sysfs) assert.equal(peerDown.port.physState, PHYS.POLLING);
        assert.deepEqual(peerUp.async, ['PORT_ACTIVE']);
      } else {
        // siw_netdev_event ignores NETDEV_CHANGE.
        assert.deepEqual(peerDown.async, []);
        assert.deepEqual(peerDown.port, { state: PortState.ACTIVE, physState: PHYS.LINK_UP });
        assert.deepEqual(peerUp.async, []);
      }
      assert.deepEqual(peerUp.port, { state: PortState.ACTIVE, physState: PHYS.LINK_UP });
      // siw_netdev_down: every QP to ERROR when the port goes down, which closes its connection:
      // both ends disconnect, once. rxe leaves its QPs alone: the port just carries nothing.
      const disconnects = ['client RDMA_CM_EVENT_DISCONNECTED', 'server-side RDMA_CM_EVENT_DISCONNECTED'];
      assert.deepEqual(peerDown.cm, iwarp && followsCarrier ? disconnects : []);
      assert.deepEqual(peerUp.cm, []);

      const down = stepOf(r, 'down');
      const v6 = `=${'fd000009000000000000000000000001'}`;
      if (!iwarp) assert.ok(r.start.gids.some((g) => g.endsWith(v6)), 'the IPv6 address is a GID');
      if (!iwarp && !r.keepV6) {
        // The kernel drops an interface's IPv6 addresses when it goes down: their GIDs go
        // (roce_gid_mgmt.c), the IPv4 ones stay.
        assert.deepEqual(down.async, ['PORT_ERR', 'GID_CHANGE']);
        assert.ok(!down.gids.some((g) => g.endsWith(v6)), 'the IPv6 GID is gone');
        assert.ok(down.gids.some((g) => g.endsWith(`=${IPV4_GID('10.9.0.1')}`)), 'the IPv4 GID stays');
      } else assert.deepEqual(down.async, ['PORT_ERR']);
      assert.deepEqual(down.port, { state: PortState.DOWN, physState: PHYS.DISABLED });
      assert.equal(down.bind, 'EADDRNOTAVAIL', 'a device whose interface is down takes no new id');
      assert.equal(down.qp, iwarp ? 'ERR' : 'RTS');
      if (r.udUp !== undefined) {
        // A port that is down carries nothing: a datagram fails as one that cannot be sent.
        assert.equal(r.udUp, WcStatus.SUCCESS);
        assert.equal(r.udDown, WcStatus.LOC_QP_OP_ERR);
      }
      assert.deepEqual(down.cm, iwarp && !followsCarrier ? disconnects : []);
      const up = stepOf(r, 'up');
      assert.deepEqual(up.async, ['PORT_ACTIVE']);
      assert.deepEqual(up.port, { state: PortState.ACTIVE, physState: PHYS.LINK_UP });
      assert.deepEqual(up.cm, []);

      const added = stepOf(r, 'address added');
      const removed = stepOf(r, 'address removed');
      if (iwarp) {
        // The one GID of an iWARP port is its MAC: addresses do not touch it.
        assert.deepEqual(added.async, []);
        assert.deepEqual(added.gids, r.start.gids);
        assert.deepEqual(removed.async, []);
      } else {
        // roce_gid_mgmt.c: one GID for the new address, in a new index; the others keep theirs.
        const upGids = stepOf(r, 'up').gids;
        assert.deepEqual(added.async, ['GID_CHANGE']);
        assert.equal(added.gids.length, upGids.length + 1);
        for (const g of upGids) assert.ok(added.gids.includes(g), `${g} kept its index`);
        assert.ok(added.gids.some((g) => g.endsWith(`=${IPV4_GID('10.9.1.1')}`)), 'the new address is a GID');
        assert.deepEqual(removed.async, ['GID_CHANGE']);
      }
      assert.ok(r.gidsBack, 'the table is back as it was once the address is gone');
      assert.deepEqual([...added.cm, ...removed.cm], []);

      // NETDEV_CHANGEMTU: no event (rxe_notify sets the MTU, siw ignores it); the port's active
      // MTU follows the interface (1500 → 1024, 9000 → 4096) where the MTU can be read.
      const mtu = stepOf(r, 'mtu');
      assert.deepEqual([...mtu.async, ...mtu.cm], []);
      assert.equal(r.start.activeMtu, 3);
      if (sysfs) assert.equal(mtu.activeMtu, 5);

      const mac = stepOf(r, 'hardware address');
      if (iwarp) {
        // siw: NETDEV_CHANGEADDR → LID_CHANGE; its GID is the new MAC.
        assert.deepEqual(mac.async, ['LID_CHANGE']);
        assert.deepEqual(mac.gids, ['0=02112233445500000000000000000000']);
      } else {
        // roce_gid_mgmt.c: the default GID (index 0) is made again from the new MAC.
        assert.ok(mac.async.length >= 1 && mac.async.every((e) => e === 'GID_CHANGE'), `events ${mac.async}`);
        assert.equal(mac.gids[0], '0=fe80000000000000001122fffe334455');
      }
      // cma_netdev_change: every id bound to the interface.
      assert.deepEqual(mac.cm, ['bound RDMA_CM_EVENT_ADDR_CHANGE', 'client RDMA_CM_EVENT_ADDR_CHANGE']);

      const gone = stepOf(r, 'deleted');
      // NETDEV_DOWN then NETDEV_UNREGISTER: PORT_ERR, then DEVICE_FATAL from uverbs.
      assert.deepEqual(gone.async, ['PORT_ERR', 'DEVICE_FATAL']);
      // cma_process_remove: each id attached to the device; the server's ids are another device's.
      assert.deepEqual(gone.cm, ['bound RDMA_CM_EVENT_DEVICE_REMOVAL', 'client RDMA_CM_EVENT_DEVICE_REMOVAL']);
      assert.deepEqual(gone.port, { error: 'EIO' });
      assert.equal(gone.pd, 'EIO');
      assert.equal(gone.qp, 'ERR');
      assert.equal(gone.boundState, 'DEVICE_REMOVAL');
      assert.equal(gone.clientState, 'DEVICE_REMOVAL');
      assert.equal(gone.listed, false);
      // Every work request posted completes once: the receive posted before, flushed.
      assert.deepEqual(gone.flushed, [`77 ${WcStatus.WR_FLUSH_ERR}`]);
      assert.equal(r.flushedLater, 0);
      // The wildcard listener (on loopback's device) keeps accepting.
      assert.equal(r.serverAfter, 'CONNECT');
    });
  }
}

test('the soft devices are watched', () => {
  if (providers.length === 0 && getDeviceList().length > 0) assert.fail('no device follows its interface');
});
