// Run in the reference VM (node native-atomics.mjs <package dir> <device> <address> <port>): an RC
// connection through the native backend on the kernel's device, then compare-and-swap and
// fetch-and-add from one side into the other's memory. Prints a JSON object: { device, atomicCap,
// posted, completions: [{ opcode, status, byteLen, old }], remote: [u64 at 0, u64 at 8] } or, when
// the kernel refuses the post, { device, atomicCap, refused: errno code }.
const [root, device, address, port] = process.argv.slice(2);
process.env.RDMACM_DEVICE = device;
const lib = await import(`${root}/dist/index.js`);
const { createId, PortSpace, Access, WrOpcode, SendFlags, getDeviceList } = lib;

const ctx = getDeviceList().find((d) => d.name === device).open();
const atomicCap = ctx.queryDevice().atomicCap;
ctx.close();

const listen = createId(null, null, PortSpace.TCP);
listen.bindAddr({ address, port: Number(port) });
await listen.listen(1);
const cap = { maxSendWr: 4, maxRecvWr: 4, maxSendSge: 1, maxRecvSge: 1 };
const served = (async () => {
  const child = await listen.getRequest();
  child.createQp(null, { cap });
  await child.accept({ responderResources: 1, initiatorDepth: 1 });
  return child;
})();
const id = createId(null, null, PortSpace.TCP);
await id.resolveAddr(null, { address, port: Number(port) });
await id.resolveRoute();
id.createQp(null, { cap });
await id.connect({ responderResources: 1, initiatorDepth: 1 });
const child = await served;

const target = Buffer.alloc(16);
target.writeBigUInt64LE(5n, 0);
target.writeBigUInt64LE(100n, 8);
const tmr = child.pd.regMr(target, Access.LOCAL_WRITE | Access.REMOTE_ATOMIC);
const result = Buffer.alloc(16);
const rmr = id.pd.regMr(result, Access.LOCAL_WRITE);
const out = { device, atomicCap };
try {
  id.qp.postSend([
    { wrId: 1, opcode: WrOpcode.ATOMIC_CMP_AND_SWP, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: rmr.addr, length: 8, lkey: rmr.lkey }], atomic: { remoteAddr: tmr.addr, rkey: tmr.rkey, compareAdd: 5n, swap: 42n } },
    { wrId: 2, opcode: WrOpcode.ATOMIC_FETCH_AND_ADD, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: rmr.addr + 8, length: 8, lkey: rmr.lkey }], atomic: { remoteAddr: tmr.addr + 8, rkey: tmr.rkey, compareAdd: 7 } },
  ]);
  out.posted = 2;
  const wcs = [];
  const end = Date.now() + 20_000;
  while (wcs.length < 2 && Date.now() < end) {
    wcs.push(...id.sendCq.poll(4));
    if (wcs.length < 2) await new Promise((r) => setTimeout(r, 5));
  }
  out.completions = wcs.map((w, i) => ({ wrId: Number(w.wrId), opcode: w.opcode, status: w.status, byteLen: w.byteLen, old: String(result.readBigUInt64LE(i * 8)) }));
  out.remote = [String(target.readBigUInt64LE(0)), String(target.readBigUInt64LE(8))];
} catch (e) {
  out.refused = e.code ?? String(e);
}
console.log(JSON.stringify(out));
// The process ends here and the kernel releases what it holds (the leak check of native.test.js
// covers that path); the subject is the atomics.
process.exit(0);
