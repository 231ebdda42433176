// Run in the reference VM on a kernel device (node native-misuse.mjs <package dir>): handles of
// destroyed objects and handles of the wrong kind, passed to the addon directly (below the JS
// checks), must give -EINVAL and never crash. Prints a JSON object: { device, results: [[call, r]] }.
const root = process.argv[2];
const { getDeviceList, native, QpType, Access } = await import(`${root}/dist/index.js`);
const { loadBinding } = await import(`${root}/dist/native/binding.js`);
const b = loadBinding();
const dev = getDeviceList().find((d) => d.provider === native.PROVIDER);
const ctx = dev.open();
const pd = ctx.allocPd();
const ch = ctx.createCompChannel();
const cq = ctx.createCq(4, ch);
const buf = Buffer.alloc(4096);
const mr = pd.regMr(buf, Access.LOCAL_WRITE);
const qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 2, maxRecvWr: 2, maxSendSge: 1, maxRecvSge: 1 } });
const h = { qp: qp._h, cq: cq._h, mr: mr._h, pd: pd._h, ch: ch._h };
qp.destroy();
mr.dereg();
cq.destroy();
ch.destroy();
pd.dealloc();
const results = [];
const call = (name, ...args) => results.push([name, b[name](...args)]);
// destroyed objects
call('postSend', h.qp, 1);
call('postRecv', h.qp, 1);
call('modifyQp', h.qp, 1, new Float64Array(b.qaWords), null);
call('qpState', h.qp);
call('destroyQp', h.qp);
call('pollCq', h.cq, 4);
call('reqNotifyCq', h.cq, false);
call('ackCqEvents', h.cq, 1);
call('destroyCq', h.cq);
call('deregMr', h.mr);
call('regMr', h.pd, buf, 1, -1);
call('deallocPd', h.pd);
call('createCq', ctx._h, 4, h.ch, 0, 1);
call('destroyCompChannel', h.ch);
// live objects of the wrong kind
const pd2 = ctx.allocPd();
const cq2 = ctx.createCq(4);
call('postSend', cq2._h, 1);
call('pollCq', pd2._h, 1);
call('deallocPd', cq2._h);
call('createQp', pd2._h, pd2._h, cq2._h, 2, 1, 1, 1, 1, 0, false, 1);
call('regMr', cq2._h, buf, 1, -1);
cq2.destroy();
pd2.dealloc();
console.log(JSON.stringify({ device: dev.name, results }));
