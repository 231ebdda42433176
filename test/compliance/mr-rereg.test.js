// ibv_rereg_mr on every device: libibverbs' input checks (EINVAL), then the device's answer. None
// of ours re-registers — rdma-core's siw and rxe providers have no rereg_mr op (libibverbs'
// default answers EOPNOTSUPP), the native backend's addon has none — and the region stays as it
// was, still usable.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Access, ReregMrFlag, RdmaError } from '../../dist/index.js';
import { forEachDevice } from '../lib/devices.js';

const code = (c) => (e) => e instanceof RdmaError && e.code === c;
const { CHANGE_TRANSLATION, CHANGE_PD, CHANGE_ACCESS } = ReregMrFlag;

forEachDevice([], (d) => {
  test('ibv_rereg_mr: EINVAL for bad input as libibverbs checks it; then EOPNOTSUPP, the region unchanged', () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const pd2 = ctx.allocPd();
    const buf = Buffer.alloc(256);
    const mr = pd.regMr(buf, Access.LOCAL_WRITE);
    const before = [mr.addr, mr.length, mr.lkey, mr.rkey, mr.access, mr.pd];
    assert.throws(() => mr.rereg(8, null, null, 0), code('EINVAL'), 'an unknown flag');
    assert.throws(() => mr.rereg(CHANGE_TRANSLATION, null, null, 0), code('EINVAL'), 'CHANGE_TRANSLATION without memory');
    assert.throws(() => mr.rereg(CHANGE_TRANSLATION, null, Buffer.alloc(0), 0), code('EINVAL'), 'CHANGE_TRANSLATION of no bytes');
    assert.throws(() => mr.rereg(CHANGE_PD, pd2, null, Access.REMOTE_READ), code('EINVAL'), 'access flags without CHANGE_ACCESS');
    for (const [flags, p, mem, access] of [
      [CHANGE_ACCESS, null, null, Access.LOCAL_WRITE | Access.REMOTE_READ],
      [CHANGE_PD, pd2, null, 0],
      [CHANGE_TRANSLATION, null, Buffer.alloc(128), 0],
    ]) {
      assert.throws(() => mr.rereg(flags, p, mem, access), code('EOPNOTSUPP'), `flags ${flags}`);
    }
    assert.deepEqual([mr.addr, mr.length, mr.lkey, mr.rkey, mr.access, mr.pd], before, 'the region as it was');
    mr.dereg();
    assert.throws(() => mr.rereg(CHANGE_ACCESS, null, null, Access.LOCAL_WRITE), code('EINVAL'), 'deregistered');
    pd2.dealloc();
    pd.dealloc();
  });
});
