// The iWARP tunables as typed configuration: environment defaults read on first use (not at
// load), per-device overrides, validation, and an override changing a real connection (the MPA
// Reply wait of siw_lo only). Loopback only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';

// Set before the first use of the configuration, after the module has loaded: still honoured.
const { iwarp, createId, createEventChannel, PortSpace, CmEventType, getDeviceList, RdmaError } = await import('../../../../dist/index.js');
const { resetIwarpConfig } = await import('../../../../dist/transport/iwarp/config.js');
process.env.RDMACM_IWARP_HOLD_MS = '123';
process.env.RDMACM_IWARP_P2P = '0';

test('defaults come from the environment when first used; overrides per device win', () => {
  resetIwarpConfig();
  const d = iwarp.config();
  assert.equal(d.holdGraceMs, 123);
  assert.equal(d.p2p, false);
  assert.equal(d.crc, false);
  assert.equal(d.rtrNudgeMs, 50);
  assert.equal(d.mpaReplyTimeoutMs, 10_000);
  assert.equal(d.mpaRequestTimeoutMs, 5_000);
  assert.equal(d.directPlacementMin, 8192, 'direct placement on by default');
  assert.equal(iwarp.config('siw_nosuch'), d, 'no override: the defaults');
  iwarp.configure({ crc: true }, 'siw_x');
  assert.equal(iwarp.config('siw_x').crc, true);
  assert.equal(iwarp.config('siw_x').holdGraceMs, 123, 'other fields from the defaults');
  assert.equal(iwarp.config().crc, false);
  iwarp.configure({ holdGraceMs: 7 });
  assert.equal(iwarp.config('siw_x').holdGraceMs, 7, 'a changed default shows through the override');
  assert.equal(iwarp.config('siw_x').crc, true);
  iwarp.configure({ rtrNudgeLocal: true });
  assert.equal(iwarp.config().nudgeLocalPeers(), true);
  iwarp.configure({ rtrNudgeLocal: false });
  assert.equal(iwarp.config().nudgeLocalPeers(), false);
  for (const bad of [{ crc: 1 }, { holdGraceMs: -1 }, { holdGraceMs: '5' }, { rtrNudgeLocal: 'yes' }, { nope: 1 }]) {
    assert.throws(() => iwarp.configure(bad), (e) => e instanceof RdmaError && e.code === 'EINVAL', JSON.stringify(bad));
  }
  assert.ok(Object.isFrozen(iwarp.config()));
  resetIwarpConfig();
  delete process.env.RDMACM_IWARP_HOLD_MS;
  delete process.env.RDMACM_IWARP_P2P;
  assert.equal(iwarp.config().holdGraceMs, 200, 'reset re-reads the environment');
  process.env.RDMACM_IWARP_DIRECT = '0';
  resetIwarpConfig();
  assert.equal(iwarp.config().directPlacementMin, Infinity, 'RDMACM_IWARP_DIRECT=0 turns direct placement off');
  delete process.env.RDMACM_IWARP_DIRECT;
  resetIwarpConfig();
});

test("a device's override changes its connections: the MPA Reply wait of siw_lo", async () => {
  resetIwarpConfig();
  const lo = getDeviceList().find((d) => d.name === 'siw_lo');
  assert.ok(lo, 'siw_lo listed');
  iwarp.configure({ mpaReplyTimeoutMs: 150 }, 'siw_lo');
  // A TCP server that accepts and never answers the MPA Request.
  const socks = [];
  const srv = net.createServer((s) => socks.push(s));
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const ch = createEventChannel();
  const id = createId(ch, null, PortSpace.TCP);
  try {
    await id.resolveAddr(null, { address: '127.0.0.1', port: srv.address().port });
    (await ch.getEvent(AbortSignal.timeout(3000))).ack();
    await id.resolveRoute();
    (await ch.getEvent(AbortSignal.timeout(3000))).ack();
    assert.equal(id.verbs.device.name, 'siw_lo');
    id.createQp(null, { cap: { maxSendWr: 1, maxRecvWr: 1 } });
    const t0 = Date.now();
    await id.connect();
    const ev = await ch.getEvent(AbortSignal.timeout(3000));
    const took = Date.now() - t0;
    assert.equal(ev.event, CmEventType.UNREACHABLE);
    assert.equal(ev.status, -110);
    ev.ack();
    assert.ok(took >= 140 && took < 2500, `UNREACHABLE after ${took} ms (override 150 ms, default 10 s)`);
  } finally {
    if (id.qp) id.destroyQp();
    await id.destroy();
    ch.destroy();
    for (const s of socks) s.destroy();
    srv.close();
    resetIwarpConfig();
  }
});
