// A QP's state changes are traced under RDMA_TRACE=qp, one line each, by every path that changes
// it: modify (a modify to the state it is in is no change and leaves no line) and destroy.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

const INDEX = new URL('../../../dist/index.js', import.meta.url).href;

test('modify and destroy each leave one qp trace line, QP[n] from -> to (why)', () => {
  const src = `
    const { getDeviceList, QpType, QpState, Access } = await import(${JSON.stringify(INDEX)});
    const ctx = getDeviceList().find((d) => d.name === 'siw_lo').open();
    const pd = ctx.allocPd();
    const cq = ctx.createCq(4);
    const qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: 1, maxSendSge: 1, maxRecvSge: 1 } });
    qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: Access.REMOTE_WRITE });
    qp.modify({ qpState: QpState.INIT });
    qp.modify({ qpState: QpState.ERR });
    qp.destroy();
    console.log(qp.qpNum);
    cq.destroy(); pd.dealloc(); ctx.close();`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', src], { encoding: 'utf8', timeout: 20_000, env: { ...process.env, RDMA_TRACE: 'qp', RDMACM_BACKEND: 'soft' } });
  assert.equal(r.status, 0, r.stderr);
  const n = r.stdout.trim();
  const lines = r.stderr.split('\n').filter((l) => l.startsWith('[rdma:qp]') && l.includes(' -> '));
  assert.deepEqual(lines, [`[rdma:qp] QP[${n}] RESET -> INIT (modify_qp)`, `[rdma:qp] QP[${n}] INIT -> ERR (modify_qp)`, `[rdma:qp] QP[${n}] ERR -> RESET (destroyed)`]);
});
