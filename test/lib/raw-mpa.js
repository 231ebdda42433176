// A raw iWARP initiator played by a plain TCP socket: hand-built MPA start frames and FPDUs, for
// the tests that attack our passive side (the API in-process, or the shipped servers as separate
// processes). Nothing here goes through our CM or QP code on the attacking side.
import assert from 'node:assert/strict';
import net from 'node:net';
import { encodeMpaStartFrame, decodeMpaStartFrame, encodeFpdu, decodeTerminateFpdu, RdmapOpcode } from '../../dist/wire/index.js';
import { sleep, until } from './wait.js';


/** An MPA Request as our initiator (and siw's) sends it: rev 2, Enhanced, P2P offering a Write RTR. */
export function mpaRequest({ crc = false, p2p = true, ird = 4, ord = 4, privateData = new Uint8Array(0) } = {}) {
  return encodeMpaStartFrame({ type: 'request', markers: false, crc, reject: false, enhanced: true, rev: 2, ird, ord, p2p, rtrSend: false, rtrWrite: p2p, rtrRead: false, privateData });
}

/** The zero-length RDMA Write a P2P initiator sends as its RTR (siw: STag 1, TO 0). */
export const rtrWrite = () => encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: 1, to: 0 });

/**
 * A TCP connection to `host:port` that records what it receives. `until(pred, ms)` polls;
 * `isClosed()` once the peer closed (or reset) it.
 */
export async function rawSocket(port, host = '127.0.0.1') {
  const sock = net.connect({ host, port });
  await new Promise((r, j) => sock.once('connect', r).once('error', j));
  const chunks = [];
  let ended = false;
  sock.on('data', (d) => chunks.push(d));
  sock.on('close', () => (ended = true));
  sock.on('error', () => {});
  const all = () => Buffer.concat(chunks);
  return { sock, all, until: (pred, ms = 3000) => until(pred, ms, 'the peer'), isClosed: () => ended, send: (b) => sock.write(b) };
}

/**
 * A raw initiator: connects, sends an MPA Request ({@link mpaRequest} options), reads the Reply.
 * `after()` is what came behind the Reply.
 */
export async function rawClient(port, opts = {}) {
  const c = await rawSocket(port, opts.host);
  c.send(mpaRequest(opts));
  await c.until(() => c.all().length >= 20 || c.isClosed(), opts.timeoutMs ?? 3000);
  await c.until(() => !('needMore' in decodeMpaStartFrame(c.all(), 'reply')) || c.isClosed(), opts.timeoutMs ?? 3000);
  const rep = decodeMpaStartFrame(c.all(), 'reply');
  assert.ok('frame' in rep, 'got an MPA Reply');
  return { ...c, reply: rep.frame, after: () => c.all().subarray(rep.length) };
}

/** Wait for a TERMINATE behind the Reply and check its layer/etype/ecode, then the close. */
export async function expectTerminate(c, layer, etype, ecode) {
  await c.until(() => c.after().length >= 28 || c.isClosed());
  const bytes = c.after();
  assert.ok(bytes.length >= 28, `expected a TERMINATE, got ${bytes.length} bytes then close`);
  const t = decodeTerminateFpdu(bytes, 0);
  assert.deepEqual([t.layer, t.etype, t.ecode], [layer, etype, ecode], 'TERMINATE layer/etype/ecode');
  await c.until(() => c.isClosed());
}

/** The first TERMINATE among the FPDUs in `bytes` (MPA-framed, no CRC assumed set), or null. */
export function terminateIn(bytes) {
  let off = 0;
  while (off + 4 <= bytes.length) {
    const ulpdu = bytes.readUInt16BE(off);
    const len = 2 + ulpdu + ((4 - ((ulpdu + 2) % 4)) % 4) + 4;
    if (off + len > bytes.length) return null;
    if ((bytes[off + 3] & 0x0f) === RdmapOpcode.TERMINATE) return decodeTerminateFpdu(bytes, off);
    off += len;
  }
  return null;
}

/** Wait until the peer closed; a TERMINATE among what came behind the Reply has these codes. */
export async function expectTerminateAmong(c, layer, etype, ecode) {
  await c.until(() => c.isClosed());
  const t = terminateIn(c.after());
  assert.ok(t, `no TERMINATE in ${c.after().length} bytes`);
  assert.deepEqual([t.layer, t.etype, t.ecode], [layer, etype, ecode], 'TERMINATE layer/etype/ecode');
}

// ---- the hostile peers a listener must survive ------------------------------------------------

/** MPA Request in P2P mode, read the Reply, close (FIN) before the RTR. Resolves with the Reply. */
export async function replyThenClose(port, host) {
  const c = await rawClient(port, { host });
  c.sock.end();
  await c.until(() => c.isClosed());
  return c.reply;
}

/** MPA Request, then a reset (RST) right away, before any Reply. */
export async function requestThenReset(port, host) {
  const c = await rawSocket(port, host);
  c.send(mpaRequest());
  await sleep(2);
  c.sock.resetAndDestroy();
}

/** MPA Request, read the Reply, then bytes that are no FPDU instead of the RTR. */
export async function garbageForRtr(port, host) {
  const c = await rawClient(port, { host });
  // A whole (bad) header's worth: 0xffff as the MPA length, DDP version 0, then filler.
  c.send(Buffer.concat([Buffer.from('\xff\xff\x00\x00', 'latin1'), Buffer.alloc(60, 'garbage where the RTR belongs ')]));
  await c.until(() => c.isClosed());
  return c;
}

/** Bytes that are not an MPA Request; resolves once the listener closed the connection. */
export async function garbageRequest(port, host, bytes = Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')) {
  const c = await rawSocket(port, host);
  c.send(bytes);
  await c.until(() => c.isClosed());
  return c.all();
}

/**
 * `n` half-open connections: each sends nothing, or only the first 10 bytes of an MPA Request.
 * Returns `{ socks, closed() }`: how many the listener has closed so far.
 */
export async function halfOpenFlood(port, host, n) {
  const socks = [];
  for (let i = 0; i < n; i++) {
    const c = await rawSocket(port, host);
    if (i % 2 === 1) c.send(mpaRequest().subarray(0, 10));
    socks.push(c);
  }
  return { socks, closed: () => socks.filter((c) => c.isClosed()).length, destroy: () => socks.forEach((c) => c.sock.destroy()) };
}

/**
 * After the handshake and the RTR, Read Requests for 4 GiB − 1 bytes at STag `stag` (default: 1,
 * which nobody holds) and 0-length Reads; resolves with the bytes received once the peer closed.
 */
export async function hugeReads(port, host, { stag = 1, to = 0 } = {}) {
  const c = await rawClient(port, { host, ird: 4, ord: 4 });
  c.send(rtrWrite());
  const rr = (msn, readSize) => encodeFpdu({ opcode: RdmapOpcode.READ_REQ, msn, sinkStag: 0x1234, sinkTo: 0, readSize, srcStag: stag, srcTo: to });
  c.send(Buffer.concat([rr(1, 0xffffffff), rr(2, 0xffffffff)]));
  await c.until(() => c.isClosed(), 5000);
  return c;
}

/**
 * Connection attempts a listener must turn away before any CONNECT_REQUEST: bytes that are no
 * MPA Request, a Request with a bad key or of revision 3, one asking for markers (answered with a reject), one
 * whose PD_Length exceeds 256 (dropped), one with bytes behind it, one cut short by a FIN.
 * Resolves with `{ name, closed, reply }` for each once the listener closed it (or after `ms`).
 */
export async function junkRequests(port, host, ms = 3000) {
  const req = mpaRequest({ privateData: Buffer.from('junk') });
  const badKey = Buffer.from(req);
  badKey.write('MPA ID Req FrXme', 0, 'latin1');
  const rev3 = Buffer.from(req);
  rev3[17] = 3;
  const tries = {
    'not MPA': Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'),
    'revision 3': rev3,
    'bad key': badKey,
    markers: encodeMpaStartFrame({ type: 'request', markers: true, crc: false, reject: false, enhanced: false, rev: 1, privateData: new Uint8Array(0) }),
    'PD_Length 300': Buffer.concat([Buffer.from('MPA ID Req Frame\x00\x02\x01\x2c', 'latin1'), Buffer.alloc(300)]),
    'bytes behind the Request': Buffer.concat([req, rtrWrite()]),
    'cut short': req.subarray(0, 18),
  };
  return Promise.all(
    Object.entries(tries).map(async ([name, bytes]) => {
      const c = await rawSocket(port, host);
      c.send(bytes);
      if (name === 'cut short') c.sock.end();
      await c.until(() => c.isClosed(), ms).catch(() => {});
      const closed = c.isClosed();
      c.sock.destroy();
      const d = c.all().length > 0 ? decodeMpaStartFrame(c.all(), 'reply') : null;
      return { name, closed, reply: d && 'frame' in d ? d.frame : null };
    }),
  );
}
