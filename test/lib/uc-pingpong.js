// rdma-core's ibv_uc_pingpong (libibverbs/examples/uc_pingpong.c) over this package's verbs: the
// same TCP exchange of "LID:QPN:PSN:GID" lines (port 18515), the same UC QP setup (RTR with the
// AV, path MTU, destination QPN and RQ PSN; RTS with the SQ PSN), the same ping-pong of SENDs and
// the same output, so that it meets the real tool on a kernel device (the interop suite) and
// itself on the soft RoCE device (test/unit/transport/roce/uc-pingpong.test.js).
//
//   node test/lib/uc-pingpong.js [-p port] [-d dev] [-i ib_port] [-s size] [-m mtu] [-r rx_depth]
//                                [-n iters] [-g gid_index | -G ipv4] [servername]
//
// `-G ipv4` (not in the C tool) takes the GID index of that address's IPv4-mapped GID.
//
// Exit 0 after `iters` round trips; 1 on any error, with the C tool's message on stderr. UC loses
// what the link loses: run it over a clean link (a lost message stalls it, as the C tool).
import net from 'node:net';
import { randomInt } from 'node:crypto';
import { once } from 'node:events';
import { getDeviceList, QpType, QpState, Access, WrOpcode, SendFlags, WcStatus } from '../../dist/index.js';

const RECV_WRID = 1;
const SEND_WRID = 2;
/** `sizeof "0000:000000:000000:00000000000000000000000000000000"`: the message, NUL included. */
const MSG_LEN = 52;
const MTUS = { 256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5 };

/** The C tool's options and their defaults. */
export function parseArgs(argv) {
  const o = { port: 18515, dev: null, ibPort: 1, size: 4096, mtu: 1024, rxDepth: 500, iters: 1000, gidx: -1, gidIp: null, server: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => {
      const x = argv[++i];
      if (x === undefined) throw new Error(`${a} needs a value`);
      return x;
    };
    if (a === '-p' || a === '--port') o.port = Number(v());
    else if (a === '-d' || a === '--ib-dev') o.dev = v();
    else if (a === '-i' || a === '--ib-port') o.ibPort = Number(v());
    else if (a === '-s' || a === '--size') o.size = Number(v());
    else if (a === '-m' || a === '--mtu') o.mtu = Number(v());
    else if (a === '-r' || a === '--rx-depth') o.rxDepth = Number(v());
    else if (a === '-n' || a === '--iters') o.iters = Number(v());
    else if (a === '-g' || a === '--gid-idx') o.gidx = Number(v());
    else if (a === '-G') o.gidIp = v();
    else if (a.startsWith('-')) throw new Error(`unknown option ${a}`);
    else o.server = a;
  }
  if (MTUS[o.mtu] === undefined) throw new Error(`bad MTU ${o.mtu}`);
  return o;
}

/** `gid_to_wire_gid`: the 16 bytes as 32 hex digits, in order. */
export function gidToWire(gid) {
  return Buffer.from(gid).toString('hex');
}

/** `wire_gid_to_gid`. */
export function wireToGid(s) {
  return Uint8Array.from(Buffer.from(s.slice(0, 32), 'hex'));
}

/** The exchange message: `%04x:%06x:%06x:%s` and its NUL, padded to {@link MSG_LEN}. */
export function destMsg(d) {
  const text = `${d.lid.toString(16).padStart(4, '0')}:${d.qpn.toString(16).padStart(6, '0')}:${d.psn.toString(16).padStart(6, '0')}:${gidToWire(d.gid)}`;
  const b = Buffer.alloc(MSG_LEN);
  b.write(text, 'latin1');
  return b;
}

/** `sscanf(msg, "%x:%x:%x:%s")`. */
export function parseDest(b) {
  const [lid, qpn, psn, gid] = b.toString('latin1').replace(/\0.*$/s, '').split(':');
  return { lid: parseInt(lid, 16), qpn: parseInt(qpn, 16), psn: parseInt(psn, 16), gid: wireToGid(gid ?? '') };
}

/** `inet_ntop(AF_INET6, gid)`, as the C tool prints it. */
function gidText(g) {
  if (g.subarray(0, 10).every((x) => x === 0) && g[10] === 0xff && g[11] === 0xff) return `::ffff:${g[12]}.${g[13]}.${g[14]}.${g[15]}`;
  const words = [];
  for (let i = 0; i < 16; i += 2) words.push(((g[i] << 8) | g[i + 1]).toString(16));
  // The longest run of zero words (two or more) becomes "::".
  let best = -1;
  let len = 0;
  for (let i = 0; i < 8; ) {
    if (words[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === '0') j++;
    if (j - i > len && j - i > 1) {
      best = i;
      len = j - i;
    }
    i = j;
  }
  if (best < 0) return words.join(':');
  return `${words.slice(0, best).join(':')}::${words.slice(best + len).join(':')}`;
}

const addrLine = (what, d) =>
  `  ${what} address:${what === 'local' ? '  ' : ' '}LID 0x${d.lid.toString(16).padStart(4, '0')}, QPN 0x${d.qpn.toString(16).padStart(6, '0')}, PSN 0x${d.psn.toString(16).padStart(6, '0')}, GID ${gidText(d.gid)}\n`;

/** Read exactly `n` bytes from `sock` (or fewer if it ends). */
async function readN(sock, n) {
  const chunks = [];
  let have = 0;
  for (;;) {
    const c = sock.read();
    if (c !== null) {
      chunks.push(c);
      have += c.length;
      if (have >= n) {
        const all = Buffer.concat(chunks);
        if (all.length > n) sock.unshift(all.subarray(n));
        return all.subarray(0, n);
      }
      continue;
    }
    if (sock.readableEnded || sock.destroyed) return Buffer.concat(chunks);
    await Promise.race([once(sock, 'readable'), once(sock, 'end'), once(sock, 'close')]);
  }
}

/**
 * Run one side; resolves with the exit status. `out` and `err` get what the C tool prints.
 * `opts.onListening` (server) is called once the TCP port listens.
 */
export async function ucPingpong(o, { out = (s) => process.stdout.write(s), err = (s) => process.stderr.write(s), onListening = () => {} } = {}) {
  const devs = getDeviceList();
  const dev = o.dev === null ? devs[0] : devs.find((d) => d.name === o.dev);
  if (!dev) {
    err(o.dev === null ? 'No IB devices found\n' : `IB device ${o.dev} not found\n`);
    return 1;
  }
  const ctx = dev.open();
  const pd = ctx.allocPd();
  const buf = Buffer.alloc(o.size, 0x7b);
  const mr = pd.regMr(buf, Access.LOCAL_WRITE);
  const cq = ctx.createCq(o.rxDepth + 1);
  let qp;
  try {
    qp = pd.createQp({ qpType: QpType.UC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: o.rxDepth, maxSendSge: 1, maxRecvSge: 1 } });
  } catch (e) {
    err(`Couldn't create QP (${e.code ?? e.message})\n`);
    return 1;
  }
  const inline = o.size <= qp.cap.maxInlineData ? SendFlags.INLINE : 0;
  const sge = [{ addr: mr.addr, length: o.size, lkey: mr.lkey }];
  try {
    qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: o.ibPort, qpAccessFlags: 0 });
  } catch {
    err('Failed to modify QP to INIT\n');
    return 1;
  }
  const postRecv = (n) => {
    for (let i = 0; i < n; i++) qp.postRecv({ wrId: RECV_WRID, sgList: sge });
    return n;
  };
  let routs = postRecv(o.rxDepth);
  if (o.gidIp !== null) {
    const want = Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...o.gidIp.split('.').map(Number)]);
    const n = ctx.queryPort(o.ibPort).gidTblLen;
    for (let i = 0; i < n && o.gidx < 0; i++) {
      try {
        if (Buffer.from(ctx.queryGid(o.ibPort, i)).equals(Buffer.from(want))) o.gidx = i;
      } catch {
        // an empty entry
      }
    }
    if (o.gidx < 0) {
      err(`no GID for ${o.gidIp}\n`);
      return 1;
    }
  }
  const port = ctx.queryPort(o.ibPort);
  const me = { lid: port.lid ?? 0, qpn: qp.qpNum, psn: randomInt(0x1000000), gid: o.gidx >= 0 ? ctx.queryGid(o.ibPort, o.gidx) : new Uint8Array(16) };
  out(addrLine('local', me));

  const connect = (rem) => {
    const iface = rem.gid.subarray(8).some((x) => x !== 0);
    const ahAttr = iface
      ? { isGlobal: true, portNum: o.ibPort, dlid: rem.lid, sl: 0, grh: { dgid: rem.gid, flowLabel: 0, sgidIndex: o.gidx, hopLimit: 1, trafficClass: 0 } }
      : { isGlobal: false, portNum: o.ibPort, dlid: rem.lid, sl: 0 };
    try {
      qp.modify({ qpState: QpState.RTR, ahAttr, pathMtu: MTUS[o.mtu], destQpNum: rem.qpn, rqPsn: rem.psn });
    } catch {
      err('Failed to modify QP to RTR\n');
      return false;
    }
    try {
      qp.modify({ qpState: QpState.RTS, sqPsn: me.psn });
    } catch {
      err('Failed to modify QP to RTS\n');
      return false;
    }
    return true;
  };

  let rem;
  if (o.server !== null) {
    const sock = net.connect({ host: o.server, port: o.port });
    try {
      await once(sock, 'connect');
    } catch {
      err(`Couldn't connect to ${o.server}:${o.port}\n`);
      return 1;
    }
    sock.write(destMsg(me));
    const m = await readN(sock, MSG_LEN);
    if (m.length !== MSG_LEN) {
      err("Couldn't read/write remote address\n");
      return 1;
    }
    sock.end(Buffer.from('done\0', 'latin1'));
    rem = parseDest(m);
    if (!connect(rem)) return 1;
  } else {
    const srv = net.createServer();
    srv.listen(o.port);
    await once(srv, 'listening');
    onListening();
    const [sock] = await once(srv, 'connection');
    srv.close();
    const m = await readN(sock, MSG_LEN);
    if (m.length !== MSG_LEN) {
      err(`${m.length}/${MSG_LEN}: Couldn't read remote address\n`);
      return 1;
    }
    rem = parseDest(m);
    if (!connect(rem)) {
      err("Couldn't connect to remote QP\n");
      return 1;
    }
    sock.write(destMsg(me));
    await readN(sock, 5);
    sock.end();
  }
  out(addrLine('remote', rem));

  let pending = RECV_WRID;
  const postSend = () => qp.postSend({ wrId: SEND_WRID, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED | inline, sgList: sge });
  if (o.server !== null) {
    postSend();
    pending |= SEND_WRID;
  }
  const t0 = process.hrtime.bigint();
  let rcnt = 0;
  let scnt = 0;
  while (rcnt < o.iters || scnt < o.iters) {
    const wcs = cq.poll(2);
    if (wcs.length === 0) {
      await new Promise((r) => setImmediate(r));
      continue;
    }
    for (const wc of wcs) {
      if (wc.status !== WcStatus.SUCCESS) {
        err(`Failed status ${WcStatus[wc.status]} (${wc.status}) for wr_id ${wc.wrId}\n`);
        return 1;
      }
      if (wc.wrId === SEND_WRID) ++scnt;
      else if (wc.wrId === RECV_WRID) {
        if (--routs <= 1) routs += postRecv(o.rxDepth - routs);
        ++rcnt;
      } else {
        err(`Completion for unknown wr_id ${wc.wrId}\n`);
        return 1;
      }
      pending &= ~wc.wrId;
      if (scnt < o.iters && !pending) {
        postSend();
        pending = RECV_WRID | SEND_WRID;
      }
    }
  }
  const usec = Number(process.hrtime.bigint() - t0) / 1000;
  const bytes = o.size * o.iters * 2;
  out(`${bytes} bytes in ${(usec / 1e6).toFixed(2)} seconds = ${((bytes * 8) / usec).toFixed(2)} Mbit/sec\n`);
  out(`${o.iters} iters in ${(usec / 1e6).toFixed(2)} seconds = ${(usec / o.iters).toFixed(2)} usec/iter\n`);
  qp.destroy();
  cq.destroy();
  mr.dereg();
  pd.dealloc();
  return 0;
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`${e.message}\n`);
    process.exit(1);
  }
  process.exitCode = await ucPingpong(o);
}
