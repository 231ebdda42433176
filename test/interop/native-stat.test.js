// interop lane: guest (every tool of this file runs inside the guest; see scripts/interop-lanes.js)
// The native backend's counters and resources against the kernel's own tool, in the reference VM:
// one boot with --rdma siw, one with --rdma rxe. In each, test/interop/lib/native-stat.mjs runs
// on the kernel's device through the native backend (a PD, a CQ, an MR, two RC QPs; on rxe0 the
// QPs connected to each other and carrying SENDs, RDMA WRITEs and an RDMA READ) and, in the same
// process while its objects live, reads
//   - Context.queryCounters(1), iproute2's `rdma -j statistic show link DEV/1`, queryCounters(1)
//     again: the same counter names, and every kernel value between our two readings (rxe0);
//     siw0 has no hw counters: EOPNOTSUPP from us, no counter from the kernel's tool;
//   - listResources() and `rdma -j resource show qp|cq|mr|pd`, and kernelResources('qp'): the
//     kernel lists each of our objects under the process's pid, with the values our objects
//     report (QPN, peer QPN, type, state, PSNs; CQ size; MR keys and length).
// Needs native/build/rdmacm.node (npm run build:native) besides the VM.
// Env: REFVM_VM (the VM slot, default 0), NATIVE_STAT_DEVICES (default "siw,rxe").
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { withGuest, requireRefvm, requireBuilt, REPO_ROOT, vmSlot } from './lib/refvm.js';

const ADDON = join(REPO_ROOT, 'native', 'build', 'rdmacm.node');
const DEVICES = (process.env.NATIVE_STAT_DEVICES || 'siw,rxe').split(',');
const VM = vmSlot(0);

const built = (t) => requireBuilt(t, [ADDON], 'npm run build:native needs libibverbs-dev and librdmacm-dev');

const jobFor = (dev) => `
mark ready
gtool stat 300 env RDMACM_BACKEND=native $H/node /mnt/src/test/interop/lib/native-stat.mjs /mnt/src ${dev}0 $REFVM_IP
rdma -j statistic show > $H/statistic.json 2>&1
mark finished
`;

const tailOf = (s, n = 12) => (s || '').trimEnd().split('\n').slice(-n).join('\n');

for (const dev of DEVICES) {
  test(`native backend on ${dev}0: queryCounters() and listResources() against rdma statistic / rdma resource`, { timeout: 1_200_000 }, async (t) => {
    if (!(await requireRefvm(t)) || !built(t)) return;
    const res = await withGuest({ name: `native-stat-${dev}`, rdma: dev, vm: VM, job: jobFor(dev), timeoutSec: 900, src: REPO_ROOT, node: true }, async (ctx) => {
      await ctx.waitFile('finished', 850_000);
    });
    t.diagnostic(`VM: ready after ${(res.bootMs / 1000).toFixed(1)} s, total ${(res.wallMs / 1000).toFixed(1)} s; ${res.jobDir}`);
    const rc = Number((res.read('stat.rc') ?? '').trim());
    const text = res.read('stat.out') ?? '';
    assert.equal(rc, 0, `native-stat.mjs: exit ${rc}\n${tailOf(res.read('stat.err'))}\n${tailOf(text)}`);
    const o = JSON.parse(text.trim().split('\n').pop());
    const mine = (recs) => (recs ?? []).filter((r) => r.pid === o.pid);
    const { ours, api, rdma } = o.resources;
    const show = (what) => `${what}\nours: ${JSON.stringify(ours)}\nrdma: ${JSON.stringify(Object.fromEntries(Object.entries(rdma).map(([k, v]) => [k, mine(v.json)])))}`;

    await t.test('counters: ours are the kernel\'s (rdma statistic show link DEV/1 between two of our readings)', () => {
      const { before, after, rdma: k } = o.counters;
      if (dev === 'siw') {
        // siw has no hw counters: EOPNOTSUPP from us, nothing from the kernel's tool
        assert.equal(before, 'EOPNOTSUPP');
        assert.equal(after, 'EOPNOTSUPP');
        assert.deepEqual(k.json ?? [], [], `rdma statistic: ${k.out} ${k.err}`);
        return;
      }
      assert.equal(k.rc, 0, k.err);
      const [row] = k.json;
      const { ifname, port, ...theirs } = row;
      assert.deepEqual([ifname, port], [`${dev}0`, 1]);
      assert.deepEqual(Object.keys(before).sort(), Object.keys(theirs).sort(), 'the same counters');
      for (const [n, v] of Object.entries(theirs)) assert.ok(before[n] <= v && v <= after[n], `${n}: ours ${before[n]}..${after[n]}, rdma ${v}`);
      assert.ok(o.allOk && o.completions === 19, `the traffic completed: ${o.completions}`);
      assert.ok(theirs.sent_pkts >= 11 && theirs.rdma_sends >= 8 && theirs.rdma_recvs >= 8, JSON.stringify(theirs));
    });

    await t.test('resources: the kernel lists each of our objects with the values ours report', () => {
      // QPs: the same fields and values, but pdn (our PD's handle, the kernel's own PD number)
      // and comm (our script's name, the kernel's task name)
      const kq = mine(rdma.qp.json);
      assert.deepEqual(kq.map((q) => q.lqpn).sort(), [...o.qpns].sort(), show('our QPs in rdma resource show qp'));
      for (const q of mine(ours.qp)) {
        const k = kq.find((x) => x.lqpn === q.lqpn);
        const { pdn, comm, ...a } = q;
        const { ifindex, pdn: kpdn, comm: kcomm, ...b } = k;
        assert.deepEqual(a, b, show(`QP ${q.lqpn}`));
        assert.equal(kcomm, 'node');
      }
      assert.deepEqual(mine(api), kq, 'kernelResources(\'qp\') is rdma -j resource show qp');
      // CQ: size and uses (one per QP for its send CQ, one for its receive CQ)
      const [cq] = mine(ours.cq);
      const [kcq] = mine(rdma.cq.json);
      assert.deepEqual([cq.cqe, cq.users], [kcq.cqe, kcq.users], show('CQ'));
      // MR: keys as rdma -j writes them, length
      const [mr] = mine(ours.mr);
      const [kmr] = mine(rdma.mr.json);
      assert.deepEqual([mr.rkey, mr.lkey, mr.mrlen], [kmr.rkey, kmr.lkey, kmr.mrlen], show('MR'));
      // PD: its users (the MR and the two QPs)
      const [pd] = mine(ours.pd);
      const [kpd] = mine(rdma.pd.json);
      assert.equal(pd.users, kpd.users, show('PD'));
    });
  });
}
