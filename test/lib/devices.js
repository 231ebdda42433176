// The compliance harness (after libp2p's interface-compliance-tests): a suite declares the
// capabilities it needs and runs once per registered device that has them. Devices come from
// every transport the package loads (dist/index.js); for each provider, the device that owns the
// loopback address is the one tested (traffic stays on loopback). While a device's suite runs,
// RDMACM_DEVICE pins every id to it, so CM code written without a device choice runs there.
//
// RDMACM_COMPLIANCE_DEVICES=siw_lo,rxe_lo restricts the run to those devices.
import { describe, before, after } from 'node:test';
import * as pkg from '../../dist/index.js';
import { getDeviceList, PortSpace, QpType, getCmTransport, LinkLayer, TransportType } from '../../dist/index.js';
import { getProvider } from '../../dist/verbs/provider.js';

/** Capability names a suite may require. */
export const Cap = Object.freeze({
  /** The device creates RC QPs. */
  RC: 'rc',
  /** The device creates UD QPs. */
  UD: 'ud',
  /** The device creates UC QPs. */
  UC: 'uc',
  /** Its transport can impair the link (drop datagrams on purpose): see {@link impairmentOf}. */
  IMPAIR: 'impair',
  /** The device has address handles. */
  AH: 'ah',
  /** The device attaches UD QPs to multicast groups. */
  MCAST: 'mcast',
  /** Its CM connects RDMA_PS_TCP ids (RC connections; rsockets). */
  CM_TCP: 'cm-tcp',
  /** Its CM connects RDMA_PS_UDP ids (SIDR). */
  CM_UDP: 'cm-udp',
  /** Its CM serves RDMA_PS_IB ids (RC, and UC ids where the device makes UC QPs). */
  CM_IB: 'cm-ib',
});

/** What `device` can do, probed through the public API (a QP of each type is tried). */
function probe(device) {
  const caps = new Set();
  const ctx = device.open();
  const pd = ctx.allocPd();
  const cq = ctx.createCq(1);
  for (const [type, cap] of [
    [QpType.RC, Cap.RC],
    [QpType.UC, Cap.UC],
    [QpType.UD, Cap.UD],
  ]) {
    try {
      pd.createQp({ qpType: type, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: 1 } }).destroy();
      caps.add(cap);
    } catch (e) {
      if (e?.code !== 'EOPNOTSUPP') throw e;
    }
  }
  cq.destroy();
  pd.dealloc();
  const p = getProvider(device.provider);
  if (p?.createAh) caps.add(Cap.AH);
  if (p?.attachMcast) caps.add(Cap.MCAST);
  const t = getCmTransport(device.provider);
  if (t?.portSpaces.includes(PortSpace.TCP)) caps.add(Cap.CM_TCP);
  if (t?.portSpaces.includes(PortSpace.UDP)) caps.add(Cap.CM_UDP);
  if (t?.portSpaces.includes(PortSpace.IB)) caps.add(Cap.CM_IB);
  if (impairmentOf(device) !== null) caps.add(Cap.IMPAIR);
  return caps;
}

/**
 * The link impairment of `device`'s transport, when its settings namespace (`roce`, ...) has one
 * for the device's provider: `{ configure(cfg | null), counts() }` (see docs/config.md, RDMACM_ROCE_IMPAIR).
 */
export function impairmentOf(device) {
  for (const ns of Object.values(pkg)) {
    if (ns === null || typeof ns !== 'object' || ns.PROVIDER !== device.provider) continue;
    if (typeof ns.configureImpairment === 'function' && typeof ns.impairmentCounts === 'function') {
      return { configure: ns.configureImpairment, counts: ns.impairmentCounts };
    }
  }
  return null;
}

const LOOPBACK = new Set(['127.0.0.1', '::1']);
let cached = null;

/**
 * The devices under test: per provider, its device owning a loopback address, with its
 * capabilities: `[{ device, name, provider, transportType, caps }]`.
 */
export function testDevices() {
  if (cached) return cached;
  const only = (process.env.RDMACM_COMPLIANCE_DEVICES ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  const seen = new Set();
  cached = [];
  for (const device of getDeviceList()) {
    if (seen.has(device.provider)) continue;
    if (!device.info.addresses.some((a) => LOOPBACK.has(a.address))) continue;
    if (only.length > 0 && !only.includes(device.name)) continue;
    seen.add(device.provider);
    cached.push({ device, name: device.name, provider: device.provider, transportType: device.transportType, caps: probe(device) });
  }
  return cached;
}

/**
 * Run `suite(dev)` once per device under test that has every capability in `caps`, inside a
 * `describe('[<device>] …')` during which RDMACM_DEVICE pins ids to that device. Without any
 * such device one skipped describe says so.
 */
export function forEachDevice(caps, suite, title = '') {
  const devs = testDevices().filter((d) => caps.every((c) => d.caps.has(c)));
  if (devs.length === 0) {
    describe(`${title || 'compliance'}: no device with ${caps.join(', ')}`, { skip: true }, () => {});
    return;
  }
  for (const d of devs) {
    describe(`[${d.name}]${title ? ` ${title}` : ''}`, () => {
      let saved;
      before(() => {
        saved = process.env.RDMACM_DEVICE;
        process.env.RDMACM_DEVICE = d.name;
      });
      after(() => {
        if (saved === undefined) delete process.env.RDMACM_DEVICE;
        else process.env.RDMACM_DEVICE = saved;
      });
      suite(d);
    });
  }
}

/**
 * Whether `IBV_WC_GRH` is on the successful receive completions of `d`'s connected QPs (RC, UC):
 * true on RoCE (InfiniBand transport over an Ethernet link: every packet has its IP header, and
 * rxe's do_complete sets the flag), false on iWARP (siw sets none), null on an InfiniBand link
 * (only packets sent with a GRH have it).
 */
export function recvGrhOf(d) {
  if (d.transportType === TransportType.IWARP) return false;
  const ctx = d.device.open();
  try {
    return ctx.queryPort(1).linkLayer === LinkLayer.ETHERNET ? true : null;
  } finally {
    ctx.close();
  }
}
