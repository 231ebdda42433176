// Run in the reference VM on a kernel device (node native-misuse.mjs <package dir>): handles of
// destroyed objects and handles of the wrong kind, passed to the addon directly (below the JS
// checks), must give -EINVAL and never crash. Prints a JSON object: { device, results: [[call, r]] }.
const root = process.argv[2];
const { getDeviceList, native, QpType, Access } = await import(`${root}/dist/index.js`);
const { loadBinding, scratchBuffers } = await import(`${root}/dist/native/binding.js`);
const { WR_SLOT_WORD, WR_COUNT_WORD } = await import(`${root}/dist/native/abi.js`);
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
// The slots the calls by slot name them by (given when the QP and CQ were made).
const slot = { qp: b.dataSlot(qp._h), cq: b.dataSlot(cq._h), mr: mr._slot };
const w = scratchBuffers().wr;
/** A call by slot: `s` in the slot word, `n` in the count word. */
const bySlot = (name, s, n) => {
  w[WR_SLOT_WORD] = s;
  w[WR_COUNT_WORD] = n;
  results.push([`${name}(slot ${s})`, b[name]()]);
};
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
call('dataSlot', h.qp);
call('dataSlot', h.cq);
bySlot('postSendSlot', slot.qp, 1);
bySlot('postRecvSlot', slot.qp, 1);
bySlot('pollCqSlot', slot.cq, 1);
bySlot('postSendSlot', 0, 1);
bySlot('pollCqSlot', 0xffffffff, 1);
// live objects of the wrong kind
const pd2 = ctx.allocPd();
const cq2 = ctx.createCq(4);
call('postSend', cq2._h, 1);
call('pollCq', pd2._h, 1);
call('deallocPd', cq2._h);
call('createQp', pd2._h, pd2._h, cq2._h, 2, 1, 1, 1, 1, 0, false, 1);
call('regMr', cq2._h, buf, 1, -1);
call('dataSlot', pd2._h);
const qp2 = pd2.createQp({ qpType: QpType.RC, sendCq: cq2, recvCq: cq2, cap: { maxSendWr: 2, maxRecvWr: 2, maxSendSge: 1, maxRecvSge: 1 } });
const mr2 = pd2.regMr(buf, Access.LOCAL_WRITE);
bySlot('postSendSlot', b.dataSlot(cq2._h), 1);
bySlot('pollCqSlot', b.dataSlot(qp2._h), 1);
bySlot('postRecvSlot', mr2._slot, 1);
bySlot('postSendSlot', b.dataSlot(qp2._h), 0);
bySlot('postRecvSlot', b.dataSlot(qp2._h), 33);
qp2.destroy();
mr2.dereg();
cq2.destroy();
pd2.dealloc();
console.log(JSON.stringify({ device: dev.name, results }));
