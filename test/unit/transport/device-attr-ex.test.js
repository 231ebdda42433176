// ibv_query_device_ex on the soft devices: what the kernel's siw0 and rxe0 (Linux 6.1) answer in
// `ibv_devinfo -v` — device_cap_flags_ex equal to device_cap_flags (siw 0x200000, rxe 0x1223C76),
// no ODP, no completion clock, no TSO/RSS/packet pacing/tag matching/CQ moderation/device memory,
// one port.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getDeviceList } from '../../../dist/index.js';

const ZERO_CAPS = {
  compMask: 0,
  odpCaps: { generalCaps: 0n, perTransportCaps: { rcOdpCaps: 0, ucOdpCaps: 0, udOdpCaps: 0 } },
  completionTimestampMask: 0n,
  hcaCoreClock: 0n,
  tsoCaps: { maxTso: 0, supportedQpts: 0 },
  rssCaps: { supportedQpts: 0, maxRwqIndirectionTables: 0, maxRwqIndirectionTableSize: 0, rxHashFieldsMask: 0n, rxHashFunction: 0 },
  maxWqTypeRq: 0,
  packetPacingCaps: { qpRateLimitMin: 0, qpRateLimitMax: 0, supportedQpts: 0 },
  rawPacketCaps: 0,
  tmCaps: { maxRndvHdrSize: 0, maxNumTags: 0, flags: 0, maxOps: 0, maxSge: 0 },
  cqModCaps: { maxCqCount: 0, maxCqPeriod: 0 },
  maxDmSize: 0n,
  pciAtomicCaps: { fetchAdd: 0, swap: 0, compareSwap: 0 },
  xrcOdpCaps: 0,
  physPortCntEx: 1,
};

for (const [provider, flags] of [['siw', 0x200000n], ['rxe', 0x1223c76n]]) {
  test(`${provider}: ibv_query_device_ex as the kernel's ${provider}0 answers it`, () => {
    const dev = getDeviceList().find((d) => d.provider === provider);
    assert.ok(dev, `a ${provider} device`);
    const ctx = dev.open();
    const { origAttr, deviceCapFlagsEx, ...rest } = ctx.queryDeviceEx();
    assert.deepEqual(origAttr, ctx.queryDevice());
    assert.equal(deviceCapFlagsEx, flags);
    assert.deepEqual(rest, ZERO_CAPS);
  });
}
