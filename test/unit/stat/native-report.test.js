// A process that opened a soft device and a native one (the stand-in addon,
// test/fixtures/native/fake-addon.cjs): its report — what rdmacm-stat shows of it — lists both
// devices and the native device's objects, a native QP with the fields the kernel gives
// `rdma resource` (nldev fill_res_qp_entry: no port before one is set, the peer QPN, both PSNs
// and the path migration state of an RC QP).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

process.env.RDMACM_NATIVE_PATH = fileURLToPath(new URL('../../fixtures/native/fake-addon.cjs', import.meta.url));
delete process.env.RDMACM_NATIVE;
delete process.env.RDMACM_BACKEND;
const { getDeviceList, native, QpType } = await import('../../../dist/index.js');
const { statReport, statServiceListening } = await import('../../../dist/stat/service.js');

test('a process that opened only a native device answers rdmacm-stat too', async () => {
  const nat = getDeviceList().find((d) => d.provider === native.PROVIDER);
  assert.equal(statServiceListening(), false, 'nothing opened yet');
  const nctx = nat.open();
  try {
    await new Promise((r) => setImmediate(r));
    assert.equal(statServiceListening(), true);
    assert.deepEqual(statReport().devices.map((d) => d.name), [nat.name]);
  } finally {
    nctx.close();
  }
});

test('a process with a soft and a native device: both in its report, the native QP as the kernel lists it', () => {
  const devs = getDeviceList();
  const nat = devs.find((d) => d.provider === native.PROVIDER);
  const soft = devs.find((d) => d.name === 'rxe_lo');
  assert.ok(nat && soft, devs.map((d) => d.name).join(' '));
  const sctx = soft.open();
  const nctx = nat.open();
  try {
    const pd = nctx.allocPd();
    const cq = nctx.createCq(4);
    const qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: 1 } });
    const r = statReport();
    assert.deepEqual(r.devices.map((d) => d.name).sort(), [nat.name, 'rxe_lo'].sort());
    assert.ok(r.devices.find((d) => d.name === 'rxe_lo').counters.sent_pkts >= 0, 'the soft device\'s counters');
    const q = r.resources.qp.find((x) => x.ifname === nat.name);
    assert.ok(q, JSON.stringify(r.resources.qp));
    assert.deepEqual(Object.keys(q), ['ifname', 'lqpn', 'rqpn', 'type', 'state', 'rq-psn', 'sq-psn', 'path-mig-state', 'pdn', 'pid', 'comm']);
    assert.deepEqual([q.lqpn, q.type, q.state], [qp.qpNum, 'RC', 'RESET']);
    const c = r.resources.cq.find((x) => x.ifname === nat.name);
    assert.equal(c.users, 2, 'the QP\'s send and receive CQ, counted as the kernel counts usecnt');
    qp.destroy();
    cq.destroy();
    pd.dealloc();
  } finally {
    nctx.close();
    sctx.close();
  }
});
