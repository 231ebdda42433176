#!/usr/bin/env node
/**
 * udpong: datagram ping-pong over rsockets — a port of rdma-core's
 * `librdmacm/examples/udpong.c` onto this package's datagram rsockets (SOCK_DGRAM over UD QPs),
 * with its options, defaults, test series, table and exit codes; `-T s` runs the same test over
 * plain UDP sockets (Node's `dgram`).
 *
 * The server (no `-s`) binds `-b` (default: what getaddrinfo gives for no host and no AI_PASSIVE,
 * the loopback address) on port `-p` (7174) and answers: a login prints `client login from <ip>`
 * and hands out a client id, start resets the client's count, echo messages are counted and sent
 * back, data messages are counted only, end returns the count. It runs until killed.
 *
 * The client prints the table header, connects, logs in (resending every second until answered),
 * then runs the latency tests (echoed, each message resent after 1 ms without an answer) and the
 * bandwidth tests (one way, the server's count of what arrived is reported) for 64 B … 1.5 KiB,
 * or one custom test with `-C` / `-S`. Where the C tool blocks or spins on a socket that cannot
 * move, this one waits for its readiness (rpoll).
 */
import { createSocket as udpSocket, type Socket as UdpSocket } from 'node:dgram';
import { lookup } from 'node:dns/promises';
import { DsSocket, RS_EAGAIN, POLLIN, POLLOUT, SOL_SOCKET, SO_SNDBUF, SO_RCVBUF, MSG_DONTWAIT, PollWaiters } from './rs-api.js';
import { Errno, type SockAddr } from './api.js';
import { atoi, errOut, errnoFrom, out, perrorN, progName, runMain } from './c-compat.js';
import { Getopt, getoptComplaint } from './getopt.js';
import { cntStr, sizeStr, sizeToCount } from './common.js';

/** udpong.c `test_size[]`. */
const TEST_SIZES = [1 << 6, 1 << 7, (1 << 7) + (1 << 6), 1 << 8, (1 << 8) + (1 << 7), 1 << 9, (1 << 9) + (1 << 8), 1 << 10, (1 << 10) + (1 << 9)];
/** `CTRL_MSG_SIZE`. */
const CTRL_MSG_SIZE = 16;
/** `struct message`: op, id, seqno, reserved, data (be32), buf[2048]. */
const MSG_SIZE = 8 + 2048;
/** The ops of `struct message`. */
const MsgOp = { login: 0, start: 1, data: 2, echo: 3, end: 4 } as const;
const OPTSTRING = 's:b:B:C:S:p:T:';

// -- the socket layer (common.h's rs_* macros: rsocket or plain socket) ---------------------------

/** What the test needs of a datagram socket: -1 + {@link errno} on failure, as the C calls. */
interface DSock {
  errno: number;
  bind(addr: SockAddr): Promise<number>;
  connect(addr: SockAddr): Promise<number>;
  /** sendto/send: the byte count, or -1 (EAGAIN when nothing can go now). */
  sendto(buf: Buffer, len: number, addr: SockAddr | null): Promise<number>;
  /** recvfrom: the byte count, or -1 (EAGAIN when nothing waits). */
  recvfrom(buf: Buffer, from: { addr: SockAddr | null }): number;
  poll(events: number, timeoutMs: number): Promise<number>;
  setsockopt(level: number, name: number, value: number): void;
  close(): Promise<void>;
}

/** rsocket(AF_INET*, SOCK_DGRAM, 0) behind {@link DSock}. */
class RsDgram implements DSock {
  errno = 0;
  constructor(private readonly s: DsSocket) {}
  private fail(e: unknown): number {
    this.errno = errnoFrom(e);
    return -1;
  }
  async bind(addr: SockAddr): Promise<number> {
    try {
      await this.s.bind(addr);
      return 0;
    } catch (e) {
      return this.fail(e);
    }
  }
  async connect(addr: SockAddr): Promise<number> {
    try {
      await this.s.connect(addr);
      return 0;
    } catch (e) {
      return this.fail(e);
    }
  }
  async sendto(buf: Buffer, len: number, addr: SockAddr | null): Promise<number> {
    try {
      const n = await this.s.sendto(buf.subarray(0, len), addr);
      if (n === RS_EAGAIN) {
        this.errno = Errno.EAGAIN;
        return -1;
      }
      return n;
    } catch (e) {
      return this.fail(e);
    }
  }
  recvfrom(buf: Buffer, from: { addr: SockAddr | null }): number {
    try {
      const r = this.s.recvfrom(buf);
      if (r === RS_EAGAIN) {
        this.errno = Errno.EAGAIN;
        return -1;
      }
      from.addr = r.from;
      return r.n;
    } catch (e) {
      return this.fail(e);
    }
  }
  poll(events: number, timeoutMs: number): Promise<number> {
    return this.s.poll(events, timeoutMs);
  }
  setsockopt(level: number, name: number, value: number): void {
    this.s.setsockopt(level, name, value);
  }
  close(): Promise<void> {
    return this.s.close();
  }
}

/** A plain UDP socket (`-T s`) behind {@link DSock}: received datagrams queue until read. */
class UdpDgram implements DSock {
  errno = 0;
  private readonly q: { msg: Buffer; from: SockAddr }[] = [];
  private readonly polls = new PollWaiters(this as UdpDgram, UdpDgram.prototype.ready);
  private connected = false;
  private readonly sock: UdpSocket;
  constructor(family: 4 | 6) {
    this.sock = udpSocket(family === 6 ? 'udp6' : 'udp4');
    this.sock.on('message', (msg, r) => {
      this.q.push({ msg, from: { address: r.address, port: r.port, family: r.family === 'IPv6' ? 'IPv6' : 'IPv4' } });
      this.polls.wake();
    });
    this.sock.on('error', () => {});
  }
  ready(events: number): number {
    return (events & POLLOUT) | (this.q.length > 0 ? events & POLLIN : 0);
  }
  private fail(e: unknown): number {
    const code = (e as NodeJS.ErrnoException).code;
    this.errno = typeof code === 'string' && code in Errno ? (Errno as Record<string, number>)[code] ?? Errno.EIO : errnoFrom(e);
    return -1;
  }
  bind(addr: SockAddr): Promise<number> {
    return new Promise((resolve) => {
      this.sock.once('error', (e) => resolve(this.fail(e)));
      this.sock.bind(addr.port, addr.address, () => resolve(0));
    });
  }
  connect(addr: SockAddr): Promise<number> {
    return new Promise((resolve) => {
      this.sock.connect(addr.port, addr.address, (e?: Error) => {
        if (e) resolve(this.fail(e));
        else {
          this.connected = true;
          resolve(0);
        }
      });
    });
  }
  sendto(buf: Buffer, len: number, addr: SockAddr | null): Promise<number> {
    const data = Buffer.from(buf.subarray(0, len));
    return new Promise((resolve) => {
      const cb = (e: Error | null): void => resolve(e ? this.fail(e) : len);
      if (this.connected || !addr) this.sock.send(data, cb);
      else this.sock.send(data, addr.port, addr.address, cb);
    });
  }
  recvfrom(buf: Buffer, from: { addr: SockAddr | null }): number {
    const m = this.q.shift();
    if (!m) {
      this.errno = Errno.EAGAIN;
      return -1;
    }
    from.addr = m.from;
    return m.msg.copy(buf, 0, 0, Math.min(m.msg.length, buf.length));
  }
  poll(events: number, timeoutMs: number): Promise<number> {
    const now = this.ready(events);
    if (now || timeoutMs === 0) return Promise.resolve(now);
    return this.polls.wait(events, timeoutMs);
  }
  setsockopt(level: number, name: number, value: number): void {
    if (level !== SOL_SOCKET) return;
    try {
      if (name === SO_SNDBUF) this.sock.setSendBufferSize(value);
      if (name === SO_RCVBUF) this.sock.setRecvBufferSize(value);
    } catch {
      /* before bind: Node refuses; the kernel's default stays */
    }
  }
  close(): Promise<void> {
    return new Promise((resolve) => {
      try {
        this.sock.close(() => resolve());
      } catch {
        resolve();
      }
    });
  }
}

/**
 * `do_poll()`: rpoll until something (or an error) is reported; 0 or POLLERR|POLLHUP bits. With
 * timeout 0 (`-T b`) the C tool spins; here each empty poll gives the event loop a turn, without
 * which nothing could arrive.
 */
async function doPoll(s: DSock, events: number, timeout: number): Promise<number> {
  let r: number;
  for (;;) {
    r = await s.poll(events, timeout);
    if (r !== 0) break;
    if (timeout === 0) await new Promise((res) => setImmediate(res));
  }
  return r & 0x18;
}

// -- the tool -------------------------------------------------------------------------------------

class Udpong {
  useRs = true;
  useAsync = false;
  flags = MSG_DONTWAIT;
  pollTimeout = 0;
  custom = false;
  echo = false;
  transferSize = 1000;
  transferCount = 1000;
  bufferSize = 0;
  testName = 'custom';
  port = '7174';
  dstAddr: string | null = null;
  srcAddr: string | null = null;
  /** `g_msg`. */
  readonly msg = Buffer.alloc(MSG_SIZE);
  /** Where the client reads answers (see {@link clientSendRecv}). */
  private readonly reply = Buffer.alloc(MSG_SIZE);
  private sock: DSock | null = null;
  private startUs = 0;
  private endUs = 0;
  private seqno = 0;
  private nextId = 0;
  private readonly recvcnt = new Array<number>(256).fill(0);

  /** set_test_opt(). */
  setTestOpt(arg: string): boolean {
    const a = arg.toLowerCase();
    if (arg.length === 1) {
      if (arg === 's') this.useRs = false;
      else if (arg === 'a') this.useAsync = true;
      else if (arg === 'b') this.flags = 0;
      else if (arg === 'n') this.flags = MSG_DONTWAIT;
      else if (arg === 'e') this.echo = true;
      else return false;
      return true;
    }
    if (a.startsWith('socket')) this.useRs = false;
    else if (a.startsWith('async')) this.useAsync = true;
    else if (a.startsWith('block')) this.flags = 0;
    else if (a.startsWith('nonblock')) this.flags = MSG_DONTWAIT;
    else if (a.startsWith('echo')) this.echo = true;
    else return false;
    return true;
  }

  private get s(): DSock {
    return this.sock as DSock;
  }

  /** getaddrinfo(host, port, {SOCK_DGRAM}): the first answer; a null host is the loopback (no AI_PASSIVE). */
  private async resolve(host: string | null): Promise<SockAddr | number> {
    const port = Number(this.port);
    if (!/^\d+$/.test(this.port) || port > 65535) {
      out('getaddrinfo: Servname not supported for ai_socktype\n');
      return -8;
    }
    if (host === null) return { address: '::1', port, family: 'IPv6' };
    try {
      const r = await lookup(host, { verbatim: true });
      return { address: r.address, port, family: r.family === 6 ? 'IPv6' : 'IPv4' };
    } catch {
      out('getaddrinfo: Name or service not known\n');
      return -2;
    }
  }

  /** rs_socket(): rsocket(), or socket() with `-T s`; "rsocket failed" on failure. */
  private makeSocket(a: SockAddr): DSock | null {
    const family = a.family === 'IPv6' ? 6 : 4;
    if (!this.useRs) return new UdpDgram(family);
    try {
      return new RsDgram(new DsSocket(family));
    } catch (e) {
      perrorN('rsocket failed', errnoFrom(e));
      return null;
    }
  }

  /** set_options(): the buffer sizes (`-B`, else 512 KiB), non-blocking unless `-T b`. */
  private setOptions(s: DSock): void {
    const v = this.bufferSize || 1 << 19;
    s.setsockopt(SOL_SOCKET, SO_SNDBUF, v);
    s.setsockopt(SOL_SOCKET, SO_RCVBUF, v);
  }

  // -- server ---------------------------------------------------------------------------------

  private async svrSend(len: number, to: SockAddr): Promise<number> {
    const s = this.s;
    for (;;) {
      if (this.useAsync) {
        const r = await doPoll(s, POLLOUT, this.pollTimeout);
        if (r) return r;
      }
      const n = await s.sendto(this.msg, len, to);
      if (n >= 0) return n;
      if (s.errno !== Errno.EAGAIN) {
        perrorN('rsend', s.errno);
        return -1;
      }
      if (!this.useAsync) await s.poll(POLLOUT, -1);
    }
  }

  private async svrRecv(from: { addr: SockAddr | null }): Promise<number> {
    const s = this.s;
    for (;;) {
      if (this.useAsync) {
        const r = await doPoll(s, POLLIN, this.pollTimeout);
        if (r) return r;
      }
      const n = s.recvfrom(this.msg, from);
      if (n >= 0) return n;
      if (s.errno !== Errno.EAGAIN) {
        perrorN('rrecv', s.errno);
        return -1;
      }
      if (!this.useAsync) await s.poll(POLLIN, -1);
    }
  }

  /** svr_process(). */
  private async svrProcess(len: number, from: SockAddr): Promise<number> {
    const m = this.msg;
    const op = m[0] as number;
    if (op === MsgOp.login) {
      out(`client login from ${from.address.startsWith('::ffff:') && from.address.includes('.') ? from.address.slice(7) : from.address}\n`);
      m[1] = this.nextId;
      this.nextId = (this.nextId + 1) & 0xff;
    }
    switch (op) {
      case MsgOp.login:
      case MsgOp.start:
        this.recvcnt[m[1] as number] = 0;
        break;
      case MsgOp.echo:
        this.recvcnt[m[1] as number] = (this.recvcnt[m[1] as number] as number) + 1;
        break;
      case MsgOp.end:
        m.writeUInt32BE((this.recvcnt[m[1] as number] as number) >>> 0, 4);
        break;
      default:
        this.recvcnt[m[1] as number] = (this.recvcnt[m[1] as number] as number) + 1;
        return 0;
    }
    const ret = await this.svrSend(len, from);
    return ret === len ? 0 : ret;
  }

  /** svr_bind(). */
  private async svrBind(): Promise<number> {
    const a = await this.resolve(this.srcAddr);
    if (typeof a === 'number') return a;
    const s = this.makeSocket(a);
    if (!s) return -1;
    this.sock = s;
    this.setOptions(s);
    if ((await s.bind(a)) !== 0) {
      perrorN('rbind', s.errno);
      await s.close();
      return -1;
    }
    return 0;
  }

  async svrRun(): Promise<number> {
    let ret = await this.svrBind();
    while (!ret) {
      const from = { addr: null as SockAddr | null };
      const len = await this.svrRecv(from);
      if (len < 0) return len;
      ret = await this.svrProcess(len, from.addr as SockAddr);
    }
    return ret;
  }

  // -- client ---------------------------------------------------------------------------------

  private async clientSend(len: number): Promise<number> {
    const s = this.s;
    for (;;) {
      if (this.useAsync) {
        const r = await doPoll(s, POLLOUT, this.pollTimeout);
        if (r) return r;
      }
      const n = await s.sendto(this.msg, len, null);
      if (n >= 0) return n;
      if (s.errno !== Errno.EAGAIN) {
        perrorN('rsend', s.errno);
        return -1;
      }
      if (!this.useAsync) await s.poll(POLLOUT, -1);
    }
  }

  /** client_recv(): wait up to `timeout` ms (0: not at all), then take one datagram into {@link reply}. */
  private async clientRecv(timeout: number): Promise<number> {
    const s = this.s;
    if (timeout) {
      const r = await s.poll(POLLIN, timeout);
      if (r <= 0) return r;
    }
    const n = s.recvfrom(this.reply, { addr: null });
    if (n < 0 && s.errno !== Errno.EAGAIN) perrorN('rrecv', s.errno);
    return n;
  }

  /**
   * client_send_recv(): send until an answer with this seqno comes back within `timeout` ms.
   * udpong.c reads answers into the message it resends, so after a late answer to an earlier
   * message (one resent after its timeout: answered twice) it resends that stale message, whose
   * answers are stale too, for ever; here answers are read aside and only the awaited one
   * replaces the message.
   */
  private async clientSendRecv(len: number, timeout: number): Promise<number> {
    const seq = this.seqno;
    this.msg[2] = seq;
    let ret: number;
    do {
      ret = await this.clientSend(len);
      if (ret !== len) return ret;
      ret = await this.clientRecv(timeout);
    } while (ret <= 0 || this.reply[2] !== seq);
    this.reply.copy(this.msg, 0, 0, ret);
    this.seqno = (this.seqno + 1) & 0xff;
    return ret;
  }

  private initLatencyTest(size: number): void {
    this.testName = `${sizeStr(size)}_lat`;
    this.transferSize = size;
    this.transferCount = Math.trunc(sizeToCount(size) / 10);
    this.echo = true;
  }

  private initBandwidthTest(size: number): void {
    this.testName = `${sizeStr(size)}_bw`;
    this.transferSize = size;
    this.transferCount = sizeToCount(size);
    this.echo = false;
  }

  /** show_perf(). */
  private showPerf(): void {
    const usec = this.endUs - this.startUs;
    const transfers = this.echo ? this.transferCount * 2 : this.msg.readUInt32BE(4);
    const bytes = transfers * this.transferSize;
    const line =
      this.testName.padEnd(10) +
      sizeStr(this.transferSize).padEnd(8) +
      cntStr(transfers).padEnd(8) +
      sizeStr(bytes).padEnd(8) +
      `${(usec / 1e6).toFixed(2)}s`.padStart(9) +
      ((bytes * 8) / (1000 * usec)).toFixed(2).padStart(10) +
      (usec / transfers).toFixed(2).padStart(11);
    out(`${line}\n`);
  }

  /** run_test(). */
  private async runTest(): Promise<number> {
    this.msg[0] = MsgOp.start;
    let ret = await this.clientSendRecv(CTRL_MSG_SIZE, 1000);
    if (ret !== CTRL_MSG_SIZE) return ret;
    this.msg[0] = this.echo ? MsgOp.echo : MsgOp.data;
    this.startUs = nowUs();
    for (let i = 0; i < this.transferCount; i++) {
      ret = this.echo ? await this.clientSendRecv(this.transferSize, 1) : await this.clientSend(this.transferSize);
      if (ret !== this.transferSize) return ret;
    }
    this.msg[0] = MsgOp.end;
    ret = await this.clientSendRecv(CTRL_MSG_SIZE, 1);
    if (ret !== CTRL_MSG_SIZE) return ret;
    this.endUs = nowUs();
    this.showPerf();
    return 0;
  }

  /** client_connect(). */
  private async clientConnect(): Promise<number> {
    const a = await this.resolve(this.dstAddr);
    if (typeof a === 'number') return a;
    const s = this.makeSocket(a);
    if (!s) return -1;
    this.sock = s;
    this.setOptions(s);
    if ((await s.connect(a)) !== 0) {
      if (s.errno === Errno.ENODEV) errOut('No RDMA devices were detected\n');
      else perrorN('rconnect', s.errno);
      await s.close();
      return -1;
    }
    this.msg[0] = MsgOp.login;
    const ret = await this.clientSendRecv(CTRL_MSG_SIZE, 1000);
    return ret === CTRL_MSG_SIZE ? 0 : ret;
  }

  async clientRun(): Promise<number> {
    out(`${'name'.padEnd(10)}${'bytes'.padEnd(8)}${'xfers'.padEnd(8)}${'total'.padEnd(8)}${'time'.padStart(8)} ${'Gb/sec'.padStart(10)}${'usec/xfer'.padStart(13)}\n`);
    const ret = await this.clientConnect();
    if (ret) return ret;
    if (!this.custom) {
      for (const size of TEST_SIZES) {
        this.initLatencyTest(size);
        await this.runTest();
      }
      for (const size of TEST_SIZES) {
        this.initBandwidthTest(size);
        await this.runTest();
      }
    } else await this.runTest();
    await this.s.close();
    return ret;
  }
}

const nowUs = (): number => Math.trunc(performance.timeOrigin * 1000 + performance.now() * 1000);

function usage(prog: string): string {
  return [
    `usage: ${prog}`,
    '\t[-s server_address]',
    '\t[-b bind_address]',
    '\t[-B buffer_size]',
    '\t[-C transfer_count]',
    '\t[-S transfer_size]',
    '\t[-p port_number]',
    '\t[-T test_option]',
    '\t    s|sockets - use standard tcp/ip sockets',
    '\t    a|async - asynchronous operation (use poll)',
    '\t    b|blocking - use blocking calls',
    '\t    n|nonblocking - use nonblocking calls',
    '\t    e|echo - server echoes all messages',
    '',
  ].join('\n');
}

async function main(argv: readonly string[]): Promise<number> {
  const u = new Udpong();
  const prog = progName('udpong');
  const g = new Getopt(argv, OPTSTRING);
  for (let it = g.next(); it; it = g.next()) {
    const a = it.optarg ?? '';
    switch (it.opt) {
      case 's':
        u.dstAddr = a;
        break;
      case 'b':
        u.srcAddr = a;
        break;
      case 'B':
        u.bufferSize = atoi(a);
        break;
      case 'C':
        u.custom = true;
        u.transferCount = atoi(a);
        break;
      case 'S':
        u.custom = true;
        u.transferSize = atoi(a);
        if (u.transferSize < CTRL_MSG_SIZE) {
          out(`size must be at least ${CTRL_MSG_SIZE} bytes\n`);
          return 1;
        }
        break;
      case 'p':
        u.port = a;
        break;
      default:
        // an unknown option, or an invalid test option, prints the usage
        if (it.opt === 'T' && u.setTestOpt(a)) break;
        if (it.opt === '?' || it.opt === ':') getoptComplaint(prog, it, OPTSTRING);
        out(usage(prog));
        return 1;
    }
  }
  // The C tool reads at most sizeof(struct message) - a larger -S overruns its buffer.
  if (u.transferSize > MSG_SIZE) u.transferSize = MSG_SIZE;
  if (u.flags) u.pollTimeout = -1;
  // Datagram rsockets take UD QPs: every transport (the soft RoCE device serves them), as udaddy.
  if (u.useRs) await import('../index.js');
  return u.dstAddr ? u.clientRun() : u.svrRun();
}

runMain('udpong', main);
