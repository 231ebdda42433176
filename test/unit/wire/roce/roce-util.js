// Shared utilities of the RoCE wire tests: seeded PRNG, hex bytes, random CM messages.
import { roce } from '../../../../dist/wire/index.js';

/** Small seeded PRNG (xorshift32) so failures reproduce. */
export function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
}

/** Bytes from a hex string (whitespace ignored). */
export function hex(s) {
  const t = s.replace(/\s+/g, '');
  return Uint8Array.from(t.match(/../g) ?? [], (x) => parseInt(x, 16));
}

/** `n` seeded pseudo-random bytes. */
export function randomBytes(next, n) {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = next();
  return b;
}

function randomPath(next) {
  return {
    localLid: next() & 0xffff, remoteLid: next() & 0xffff, localGid: randomBytes(next, 16), remoteGid: randomBytes(next, 16),
    flowLabel: next() & 0xfffff, packetRate: next() & 0x3f, trafficClass: next() & 0xff, hopLimit: next() & 0xff,
    sl: next() & 15, subnetLocal: !!(next() & 1), localAckTimeout: next() & 31,
  };
}
export const big = (next) => (BigInt(next()) << 32n) | BigInt(next());

/** A random message of each kind, every field at its full width. */
export function randomCmMessage(next, kind) {
  const { CmPrivateDataLen } = roce;
  const pd = (k) => randomBytes(next, CmPrivateDataLen[k]);
  const ids = () => ({ localCommId: next(), remoteCommId: next() });
  switch (kind) {
    case 'REQ':
      return {
        kind, localCommId: next(), vendorId: next() & 0xffffff, serviceId: big(next), localCaGuid: big(next), localQkey: next(),
        localQpn: next() & 0xffffff, responderResources: next() & 0xff, localEecn: next() & 0xffffff, initiatorDepth: next() & 0xff,
        remoteEecn: next() & 0xffffff, remoteCmResponseTimeout: next() & 31, transportType: next() & 3, e2eFlowControl: !!(next() & 1),
        startingPsn: next() & 0xffffff, localCmResponseTimeout: next() & 31, retryCount: next() & 7, pkey: next() & 0xffff,
        pathMtu: next() & 15, rdcExists: !!(next() & 1), rnrRetryCount: next() & 7, maxCmRetries: next() & 15, srq: !!(next() & 1),
        extendedTransportType: next() & 7, primaryPath: randomPath(next), alternatePath: randomPath(next), sapSupported: !!(next() & 1),
        privateData: pd('REQ'),
      };
    case 'MRA':
      return { kind, ...ids(), messageMraed: next() % 3, serviceTimeout: next() & 31, privateData: pd('MRA') };
    case 'REJ':
      return { kind, ...ids(), messageRejected: next() % 3, ariLength: next() & 0x7f, reason: next() & 0xffff, ari: randomBytes(next, 72), privateData: pd('REJ') };
    case 'REP':
      return {
        kind, ...ids(), localQkey: next(), localQpn: next() & 0xffffff, vendorId: next() & 0xffffff, localEecn: next() & 0xffffff,
        startingPsn: next() & 0xffffff, responderResources: next() & 0xff, initiatorDepth: next() & 0xff, targetAckDelay: next() & 31,
        failoverAccepted: next() & 3, e2eFlowControl: !!(next() & 1), rnrRetryCount: next() & 7, srq: !!(next() & 1),
        localCaGuid: big(next), privateData: pd('REP'),
      };
    case 'RTU':
    case 'DREP':
      return { kind, ...ids(), privateData: pd(kind) };
    case 'DREQ':
      return { kind, ...ids(), remoteQpn: next() & 0xffffff, privateData: pd('DREQ') };
    case 'SIDR_REQ':
      return { kind, requestId: next(), pkey: next() & 0xffff, reserved: next() & 0xffff, serviceId: big(next), privateData: pd('SIDR_REQ') };
    case 'SIDR_REP':
      return {
        kind, requestId: next(), status: next() & 0xff, addInfoLength: next() & 0xff, vendorId: next() & 0xffffff, qpn: next() & 0xffffff,
        serviceId: big(next), qkey: next(), addInfo: randomBytes(next, 72), privateData: pd('SIDR_REP'),
      };
  }
  throw new Error(kind);
}
export const KINDS = ['REQ', 'MRA', 'REJ', 'REP', 'RTU', 'DREQ', 'DREP', 'SIDR_REQ', 'SIDR_REP'];
