#!/usr/bin/env node
/**
 * rstream: streaming over RDMA ping-pong test — a port of rdma-core's
 * `librdmacm/examples/rstream.c` onto this package's rsockets (same options, defaults, test
 * series, table and exit codes), with `-T s` running the same test over plain TCP sockets
 * (Node's `net`), and `--json` printing one JSON object per result row instead of the table.
 *
 * The C tool is one thread of blocking or busy-polling socket calls. Here the calls are the
 * same (rsend/rrecv or send/recv through {@link Sock}, non-blocking underneath), and where the
 * C code would spin or block on a socket that cannot move, this code awaits its readiness
 * (rpoll) — the same sequence of transfers, without burning the CPU the event loop needs.
 */
import { eagerFeedback } from './startup.js';
import net from 'node:net';
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import {
  RsConn,
  RS_EAGAIN,
  RsListener,
  POLLERR,
  POLLHUP,
  POLLIN,
  POLLOUT,
  SHUT_RDWR,
  SOL_SOCKET,
  SOL_RDMA,
  IPPROTO_TCP,
  SO_SNDBUF,
  SO_RCVBUF,
  SO_REUSEADDR,
  SO_KEEPALIVE,
  TCP_NODELAY,
  TCP_KEEPIDLE,
  RDMA_INLINE,
  MSG_DONTWAIT,
  MSG_WAITALL,
} from './rs-api.js';
// No transport here: rsockets take the soft iWARP device (and what src/cli/rdma.ts adds), loaded by
// main() unless the run uses plain sockets (-T s, -T f).
import { RdmaError, Errno, RAI, getaddrinfo, type SockAddr, getDeviceList } from './api.js';
import { NetSock } from './net-sock.js';
import { atoi, errOut, out, perrorN, progName, runMain } from './c-compat.js';
import { Getopt, getoptComplaint } from './getopt.js';
import { GaiErr, gaiCode, gaiText } from './addresses.js';
import { HEADER, Optimization, StreamTool, TEST_SIZES, bandwidthPhaseBudget, streamLongOptions } from './stream-tool.js';

const EAGAIN = Errno.EAGAIN;

// -- the socket layer (common.h's rs_* macros: rsocket or plain socket) ---------------------------

/** What the test loop needs of a connected socket, rsocket or TCP. */
export interface Sock {
  /** send(): bytes taken (> 0) or -1 with {@link errno}. */
  send(buf: Buffer, off: number, len: number, flags: number): number;
  /** recv(): bytes (> 0), 0 at EOF, or -1 with {@link errno}. */
  recv(buf: Buffer, off: number, len: number, flags: number): number;
  /** poll() this socket: revents (0 on timeout). */
  poll(events: number, timeoutMs: number): Promise<number>;
  setsockopt(level: number, name: number, value: number): number;
  getsockopt(level: number, name: number): number | null;
  shutdown(how: number): Promise<void>;
  close(): Promise<void>;
  errno: number;
}

/** An rsocket. */
class RsSock implements Sock {
  errno = 0;
  constructor(readonly conn: RsConn) {}
  send(buf: Buffer, off: number, len: number): number {
    try {
      const n = this.conn.send(buf, off, len);
      if (n === RS_EAGAIN) {
        this.errno = EAGAIN;
        return -1;
      }
      return n;
    } catch (e) {
      this.errno = e instanceof RdmaError ? e.errno : Errno.EIO;
      return -1;
    }
  }
  recv(buf: Buffer, off: number, len: number): number {
    try {
      const n = this.conn.recv(buf, off, len);
      if (n === RS_EAGAIN) {
        this.errno = EAGAIN;
        return -1;
      }
      return n;
    } catch (e) {
      this.errno = e instanceof RdmaError ? e.errno : Errno.EIO;
      return -1;
    }
  }
  poll(events: number, timeoutMs: number): Promise<number> {
    return this.conn.poll(events, timeoutMs);
  }
  setsockopt(level: number, name: number, value: number): number {
    return rsSetsockopt(this.conn, level, name, value, (e) => (this.errno = e));
  }
  getsockopt(level: number, name: number): number | null {
    try {
      return this.conn.getsockopt(level, name);
    } catch (e) {
      this.errno = e instanceof RdmaError ? e.errno : Errno.EIO;
      return null;
    }
  }
  async shutdown(how: number): Promise<void> {
    await this.conn.shutdown(how).catch(() => {});
  }
  close(): Promise<void> {
    return this.conn.close();
  }
}

function rsSetsockopt(t: RsConn | RsListener, level: number, name: number, value: number, setErrno: (e: number) => void): number {
  try {
    t.setsockopt(level, name, value);
    return 0;
  } catch (e) {
    setErrno(e instanceof RdmaError ? e.errno : Errno.EIO);
    return -1;
  }
}

/** The options a listening socket keeps (for -T s the listener is a net.Server). */
class NetListener {
  errno = 0;
  private readonly conns: net.Socket[] = [];
  private waiters: (() => void)[] = [];
  keepalive = false;
  keepIdle = 7200;
  opts = new Map<string, number>();
  constructor(readonly server: net.Server) {
    server.on('connection', (s) => {
      this.conns.push(s);
      for (const w of this.waiters.splice(0)) w();
    });
  }
  async accept(): Promise<net.Socket> {
    for (;;) {
      const s = this.conns.shift();
      if (s) return s;
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }
  setsockopt(level: number, name: number, value: number): number {
    if (level === SOL_SOCKET && name === SO_KEEPALIVE) this.keepalive = value !== 0;
    else if (level === IPPROTO_TCP && name === TCP_KEEPIDLE) {
      if (value <= 0) {
        this.errno = Errno.EINVAL;
        return -1;
      }
      this.keepIdle = value;
    } else this.opts.set(`${level}:${name}`, value);
    return 0;
  }
  getsockopt(level: number, name: number): number {
    if (level === SOL_SOCKET && name === SO_KEEPALIVE) return this.keepalive ? 1 : 0;
    if (level === IPPROTO_TCP && name === TCP_KEEPIDLE) return this.keepIdle;
    return this.opts.get(`${level}:${name}`) ?? 0;
  }
}

// -- the program ------------------------------------------------------------------------------

/** Everything rstream.c keeps in globals (beyond {@link StreamTool}). */
class Rstream extends StreamTool {
  useRs = true;
  useRgai = false;
  useFork = false;
  keepalive = 0;
  rs: Sock | null = null;
  lrs: RsListener | NetListener | null = null;
  /** -T f, server side: the child handling the current connection. */
  forkChild: ChildProcess | null = null;
  /** This process is a -T f child: the connection was handed to us. */
  forkedChild = false;
  // --- output
  protected override perfTags(): { transport: string; tool: string } {
    return { transport: this.useRs ? 'rsocket' : 'socket', tool: 'rstream' };
  }

  /** common.c do_poll(): 0 when ready, else the POLLERR/POLLHUP bits (or the error). */
  async doPoll(s: Sock, events: number): Promise<number> {
    for (;;) {
      const r = await s.poll(events, this.pollTimeout === 0 ? -1 : this.pollTimeout);
      if (r !== 0) return r & (POLLERR | POLLHUP);
    }
  }

  /**
   * send_xfer(): 0, or what failed. Synchronous while the socket takes the bytes; a promise only
   * once it has to wait (then the rest goes in {@link sendXferWait}).
   */
  sendXfer(size: number): number | Promise<number> {
    const s = this.rs as Sock;
    const buf = this.buf;
    if (this.verify) this.pattern.format(buf.subarray(0, size));
    if (this.useAsync) return this.sendXferWait(size, 0);
    for (let offset = 0; offset < size; ) {
      const ret = s.send(buf, offset, size - offset, this.flags);
      if (ret > 0) offset += ret;
      else if (s.errno !== EAGAIN) {
        perrorN('rsend', s.errno);
        return ret;
      } else return this.sendXferWait(size, offset);
    }
    return 0;
  }

  private async sendXferWait(size: number, from: number): Promise<number> {
    const s = this.rs as Sock;
    const buf = this.buf;
    for (let offset = from; offset < size; ) {
      if (this.useAsync) {
        const r = await this.doPoll(s, POLLOUT);
        if (r) return r;
      } else await s.poll(POLLOUT, -1);
      const ret = s.send(buf, offset, size - offset, this.flags);
      if (ret > 0) offset += ret;
      else if (s.errno !== EAGAIN) {
        perrorN('rsend', s.errno);
        return ret;
      }
    }
    return 0;
  }

  /** recv_xfer(): 0, or what failed; synchronous while bytes are there, as {@link sendXfer}. */
  recvXfer(size: number): number | Promise<number> {
    if (this.useAsync) return this.recvXferWait(size, 0);
    this.recvOff = 0;
    const w = this.recvStep(size);
    return typeof w === 'number' ? w : this.recvXferRest(size, w);
  }

  /** Bytes of the current transfer received so far (see {@link recvStep}). */
  private recvOff = 0;

  /**
   * Receive from {@link recvOff} on: 0 (or the pattern check) once `size` bytes are in, what
   * failed, or — when the socket has nothing now — its poll(POLLIN) promise: call again once it
   * settles. The transfer loop awaits that promise itself, one await per wait with no async frame
   * in between.
   */
  private recvStep(size: number): number | Promise<number> {
    const s = this.rs as Sock;
    const buf = this.buf;
    while (this.recvOff < size) {
      const ret = s.recv(buf, this.recvOff, size - this.recvOff, this.flags);
      if (ret > 0) this.recvOff += ret;
      else if (ret === 0) return this.recvEof();
      else if (s.errno !== EAGAIN) {
        perrorN('rrecv', s.errno);
        return ret;
      } else return s.poll(POLLIN, -1);
    }
    return this.verify ? this.pattern.verify(buf.subarray(0, size)) : 0;
  }

  private async recvXferRest(size: number, wait: Promise<number>): Promise<number> {
    let w: number | Promise<number> = wait;
    while (typeof w !== 'number') {
      await w;
      w = this.recvStep(size);
    }
    return w;
  }

  /** recv_xfer() with `-a` (poll before every recv). */
  private async recvXferWait(size: number, from: number): Promise<number> {
    const s = this.rs as Sock;
    const buf = this.buf;
    for (let offset = from; offset < size; ) {
      const r = await this.doPoll(s, POLLIN);
      if (r) return r;
      const ret = s.recv(buf, offset, size - offset, this.flags);
      if (ret > 0) offset += ret;
      else if (ret === 0) return this.recvEof();
      else if (s.errno !== EAGAIN) {
        perrorN('rrecv', s.errno);
        return ret;
      }
    }
    return this.verify ? this.pattern.verify(buf.subarray(0, size)) : 0;
  }

  /** rstream.c would spin on the stale errno at end of stream; report it instead. */
  private recvEof(): number {
    perrorN('rrecv', Errno.ECONNRESET);
    return -1;
  }

  async syncTest(): Promise<number> {
    const ret = this.dstAddr ? await this.sendXfer(16) : await this.recvXfer(16);
    if (ret) return ret;
    return this.dstAddr ? this.recvXfer(16) : this.sendXfer(16);
  }

  /**
   * `n` iterations of `k` messages each way: the client sends k, then receives k; the server the
   * reverse. One async frame for all of them; a transfer that completes at once costs no promise.
   */
  async runIterations(n: number, k: number): Promise<number> {
    const client = this.dstAddr !== null;
    const size = this.transferSize;
    for (let i = 0; i < n; i++) {
      for (let half = 0; half < 2; half++) {
        const send = client === (half === 0);
        for (let t = 0; t < k; t++) {
          let ret: number | Promise<number>;
          if (!send && !this.useAsync) {
            // Receive here, awaiting the socket's poll promise directly (see recvStep).
            this.recvOff = 0;
            while (typeof (ret = this.recvStep(size)) !== 'number') await ret;
          } else {
            ret = send ? this.sendXfer(size) : this.recvXfer(size);
            if (typeof ret !== 'number') ret = await ret;
          }
          if (ret) return ret;
        }
      }
    }
    return 0;
  }

  async runTest(): Promise<number> {
    let ret = (await this.warmupBlocks((k) => this.runIterations(1, k))) || (await this.syncTest());
    if (ret) return ret;
    const cpu = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    ret = await this.runIterations(this.iterations, this.transferCount);
    if (ret) return ret;
    const usec = Number((process.hrtime.bigint() - t0) / 1000n);
    this.showPerf(usec, cpu);
    return 0;
  }

  setKeepalive(fd: Sock | RsListener | NetListener): void {
    const set = (level: number, name: number, v: number): number =>
      fd instanceof RsListener ? rsSetsockopt(fd, level, name, v, (e) => (lastErrno = e)) : withErrno(fd, fd.setsockopt(level, name, v));
    if (set(SOL_SOCKET, SO_KEEPALIVE, 1)) {
      perrorN('rsetsockopt SO_KEEPALIVE', lastErrno);
      return;
    }
    if (set(IPPROTO_TCP, TCP_KEEPIDLE, this.keepalive)) perrorN('rsetsockopt TCP_KEEPIDLE', lastErrno);
    const get = (level: number, name: number): number | null => {
      try {
        return fd.getsockopt(level, name);
      } catch {
        return null;
      }
    };
    const ka = get(SOL_SOCKET, SO_KEEPALIVE);
    if (ka !== null) out(`Keepalive: ${ka ? 'ON' : 'OFF'}\n`);
    const idle = get(IPPROTO_TCP, TCP_KEEPIDLE);
    if (idle !== null) out(`  time: ${idle}\n`);
  }

  /** set_options(): buffer sizes, TCP_NODELAY, non-blocking, inline size, keepalive. */
  setOptions(fd: Sock | RsListener | NetListener): void {
    const set = (level: number, name: number, v: number): void => {
      if (fd instanceof RsListener) rsSetsockopt(fd, level, name, v, () => {});
      else fd.setsockopt(level, name, v);
    };
    const b = this.bufferSize ? this.bufferSize : 1 << 19;
    set(SOL_SOCKET, SO_SNDBUF, b);
    set(SOL_SOCKET, SO_RCVBUF, b);
    set(IPPROTO_TCP, TCP_NODELAY, 1);
    if (this.useRs) {
      if (this.optimization === Optimization.LATENCY) set(SOL_RDMA, RDMA_INLINE, this.inlineSize);
      else if (this.optimization === Optimization.BANDWIDTH) set(SOL_RDMA, RDMA_INLINE, 0);
    }
    if (this.keepalive) this.setKeepalive(fd);
  }

  /** getaddrinfo() as rstream calls it (AI_PASSIVE for binding), or rdma_getaddrinfo (-T r / -f gid). */
  async resolve(node: string | null, passive: boolean): Promise<SockAddr> {
    if (this.gidFormat) throw new GaiErr(-6);
    const hints: { flags: number } = { flags: (passive ? RAI.PASSIVE : 0) | (this.numericHost ? RAI.NUMERICHOST : 0) };
    const r = await getaddrinfo(node, this.port, hints);
    const a = passive ? r.srcAddr : r.dstAddr;
    if (!a) throw new GaiErr(-2);
    return a;
  }

  async serverListen(): Promise<number> {
    let addr: SockAddr;
    try {
      addr = await this.resolve(this.srcAddr, true);
    } catch (e) {
      out(`getaddrinfo: ${gaiText(e)}\n`);
      return gaiCode(e);
    }
    if (this.useRs) {
      if (getDeviceList().length === 0) {
        errOut('No RDMA devices were detected\n');
        return -1;
      }
      const l = new RsListener();
      try {
        l.setsockopt(SOL_SOCKET, SO_REUSEADDR, 1);
      } catch (e) {
        perror('rsetsockopt SO_REUSEADDR', e);
        return -1;
      }
      try {
        l.bind(addr);
      } catch (e) {
        perror('rbind', e);
        return -1;
      }
      try {
        await l.listen(1);
      } catch (e) {
        perror('rlisten', e);
        await l.close();
        return -1;
      }
      this.lrs = l;
      return 0;
    }
    // A socket stays half open after the peer's FIN, as a C socket does until close().
    // Paused on connect, so that nothing is read before NetSock takes the handle over.
    const server = net.createServer({ pauseOnConnect: true, noDelay: true, allowHalfOpen: true });
    const l = new NetListener(server);
    const ok = await new Promise<NodeJS.ErrnoException | null>((resolve) => {
      server.once('error', (e: NodeJS.ErrnoException) => resolve(e));
      server.listen({ host: addr.address, port: addr.port, backlog: 1, exclusive: true }, () => resolve(null));
    });
    if (ok) {
      perrorN(ok.syscall === 'listen' ? 'rlisten' : 'rbind', ok.errno !== undefined ? Math.abs(ok.errno) : Errno.EIO);
      return -1;
    }
    server.on('error', () => {});
    this.lrs = l;
    return 0;
  }

  async serverConnect(): Promise<number> {
    const l = this.lrs as RsListener | NetListener;
    this.setOptions(l);
    if (l instanceof RsListener) {
      if (this.useAsync) {
        while (l.pending === 0) await l.poll(POLLIN, -1);
      }
      try {
        const c = await l.accept();
        this.rs = new RsSock(c);
      } catch (e) {
        perror('raccept', e);
        return -1;
      }
      this.setOptions(this.rs);
      return 0;
    }
    const s = await l.accept();
    if (this.useFork) {
      this.forkChild = this.forkFor(s);
      return 0;
    }
    s.setNoDelay(true);
    const ns = NetSock.adopt(s, true);
    ns.zeroCopy = !this.verify;
    this.rs = ns;
    this.setOptions(ns);
    return 0;
  }

  /** -T f: hand the accepted socket to a child process that runs the tests on it. */
  private forkFor(s: net.Socket): ChildProcess {
    const phase = this.custom ? 'custom' : this.optimization === Optimization.LATENCY ? 'latency' : 'bandwidth';
    const child = fork(process.argv[1] as string, process.argv.slice(2), {
      env: { ...process.env, RSTREAM_FORK_CHILD: phase },
      stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    });
    child.once('message', () => {
      child.send('conn', s);
    });
    return child;
  }

  async clientConnect(): Promise<number> {
    let dst: SockAddr;
    try {
      dst = await this.resolve(this.dstAddr, false);
    } catch (e) {
      out(`getaddrinfo: ${gaiText(e)}\n`);
      return gaiCode(e);
    }
    let src: SockAddr | null = null;
    if (this.srcAddr) {
      try {
        src = await this.resolve(this.srcAddr, true);
      } catch (e) {
        out(`getaddrinfo src_addr: ${gaiText(e)}\n`);
        return gaiCode(e);
      }
    }
    const nonblock = (this.flags & MSG_DONTWAIT) !== 0;
    if (this.useRs) {
      if (getDeviceList().length === 0) {
        errOut('No RDMA devices were detected\n');
        return -1;
      }
      const c = new RsConn();
      const s = new RsSock(c);
      this.rs = s;
      this.setOptions(s);
      if (src) {
        try {
          c.bind(src);
        } catch (e) {
          perror('rbind', e);
          await c.close();
          return -1;
        }
      }
      try {
        await c.connect(dst);
      } catch (e) {
        const en = e instanceof RdmaError ? e.errno : Errno.EIO;
        await c.close();
        if (nonblock) {
          // rconnect returned EINPROGRESS; rpoll then reports POLLOUT|POLLERR with errno set.
          perrorN('rpoll', en);
          return POLLERR;
        }
        perrorN('rconnect', en);
        return -1;
      }
      return 0;
    }
    const opts: net.NetConnectOpts = { host: dst.address, port: dst.port, allowHalfOpen: true };
    if (src) {
      opts.localAddress = src.address;
      opts.localPort = src.port;
    }
    let s: NetSock;
    try {
      s = await NetSock.connect(opts);
    } catch (e) {
      const fail = e as NodeJS.ErrnoException;
      if (nonblock) {
        // connect() said EINPROGRESS; poll() then reports POLLERR|POLLHUP and errno is unchanged.
        perrorN('rpoll', Errno.EINPROGRESS);
        return POLLERR | POLLHUP;
      }
      perrorN(fail.syscall === 'bind' ? 'rbind' : 'rconnect', fail.errno !== undefined ? Math.abs(fail.errno) : Errno.EIO);
      return -1;
    }
    s.zeroCopy = !this.verify;
    this.rs = s;
    this.setOptions(s);
    return 0;
  }

  async closeRs(): Promise<void> {
    const s = this.rs;
    this.rs = null;
    if (!s) return;
    await s.shutdown(SHUT_RDWR);
    await s.close();
  }

  async waitFork(): Promise<void> {
    const c = this.forkChild;
    this.forkChild = null;
    if (c && c.exitCode === null && c.signalCode === null) await once(c, 'exit');
  }

  async run(): Promise<number> {
    let ret = 0;
    if (!this.allocBuf()) return -1;
    if (!this.dstAddr) {
      ret = await this.serverListen();
      if (ret) return ret;
    }
    if (!this.json) out(HEADER);
    if (!this.custom) {
      this.optimization = Optimization.LATENCY;
      ret = this.dstAddr ? await this.clientConnect() : await this.serverConnect();
      if (ret) return ret;
      if (!this.forkChild) {
        for (const t of TEST_SIZES) {
          if (t.option > this.sizeOption) continue;
          this.initLatencyTest(t.size);
          await this.runTest();
        }
      }
      if (this.forkChild) await this.waitFork();
      else await this.closeRs();
      this.optimization = Optimization.BANDWIDTH;
      if (this.useRs) bandwidthPhaseBudget();
      ret = this.dstAddr ? await this.clientConnect() : await this.serverConnect();
      if (ret) return ret;
      if (!this.forkChild) {
        for (const t of TEST_SIZES) {
          if (t.option > this.sizeOption) continue;
          this.initBandwidthTest(t.size);
          await this.runTest();
        }
      }
    } else {
      ret = this.dstAddr ? await this.clientConnect() : await this.serverConnect();
      if (ret) return ret;
      if (!this.forkChild) ret = await this.runTest();
    }
    if (this.forkChild) await this.waitFork();
    else await this.closeRs();
    return ret;
  }

  /** -T f child: take the connection from the parent and run the phase's tests on it. */
  async runForked(phase: string): Promise<number> {
    this.forkedChild = true;
    if (!this.allocBuf()) return -1;
    const sock = await new Promise<net.Socket>((resolve) => {
      process.on('message', (_m, handle) => resolve(handle as net.Socket));
      process.send?.('ready');
    });
    sock.setNoDelay(true);
    const ns = NetSock.adopt(sock, false);
    ns.zeroCopy = !this.verify;
    this.rs = ns;
    let ret = 0;
    if (phase === 'custom') {
      this.optimization = Optimization.MIXED;
      this.setOptions(this.rs);
      ret = await this.runTest();
    } else {
      const lat = phase === 'latency';
      this.optimization = lat ? Optimization.LATENCY : Optimization.BANDWIDTH;
      this.setOptions(this.rs);
      for (const t of TEST_SIZES) {
        if (t.option > this.sizeOption) continue;
        if (lat) this.initLatencyTest(t.size);
        else this.initBandwidthTest(t.size);
        await this.runTest();
      }
    }
    await this.closeRs();
    process.disconnect?.();
    return ret;
  }

  /** set_test_opt(). */
  setTestOpt(arg: string): boolean {
    if (arg.length === 1) {
      switch (arg) {
        case 's':
          this.useRs = false;
          return true;
        case 'a':
          this.useAsync = true;
          return true;
        case 'b':
          this.flags = (this.flags & ~MSG_DONTWAIT) | MSG_WAITALL;
          return true;
        case 'f':
          this.useFork = true;
          this.useRs = false;
          return true;
        case 'n':
          this.flags |= MSG_DONTWAIT;
          return true;
        case 'r':
          this.useRgai = true;
          return true;
        case 'v':
          this.verify = true;
          return true;
        default:
          return false;
      }
    }
    const pre = (word: string, n: number): boolean => arg.length >= n && arg.slice(0, n).toLowerCase() === word.slice(0, n);
    if (pre('socket', 6)) this.useRs = false;
    else if (pre('async', 5)) this.useAsync = true;
    else if (pre('block', 5)) this.flags = (this.flags & ~MSG_DONTWAIT) | MSG_WAITALL;
    else if (pre('nonblock', 8)) this.flags |= MSG_DONTWAIT;
    else if (pre('resolve', 7)) this.useRgai = true;
    else if (pre('verify', 6)) this.verify = true;
    else if (pre('fork', 4)) {
      this.useFork = true;
      this.useRs = false;
    } else return false;
    return true;
  }
}

let lastErrno = 0;
function withErrno(fd: { errno: number }, r: number): number {
  if (r) lastErrno = fd.errno;
  return r;
}

function perror(prefix: string, e: unknown): void {
  perrorN(prefix, e instanceof RdmaError ? e.errno : Errno.EIO);
}

/** The usage text (stdout), as rstream.c prints it. */
export function usage(prog: string): string {
  return [
    `usage: ${prog}`,
    '\t[-s server_address]',
    '\t[-b bind_address]',
    '\t[-f address_format]',
    '\t    name, ip, ipv6, or gid',
    '\t[-B buffer_size]',
    '\t[-i inline_size]',
    '\t[-I iterations]',
    '\t[-C transfer_count]',
    '\t[-S transfer_size or all]',
    '\t[-p port_number]',
    '\t[-k keepalive_time]',
    '\t[-T test_option]',
    '\t    s|sockets - use standard tcp/ip sockets',
    '\t    a|async - asynchronous operation (use poll)',
    '\t    b|blocking - use blocking calls',
    '\t    f|fork - fork server processing',
    '\t    n|nonblocking - use nonblocking calls',
    '\t    r|resolve - use rdma cm to resolve address',
    '\t    v|verify - verify data',
    '',
  ].join('\n');
}

/** rstream.c main's getopt string. */
const OPTSTRING = 's:b:f:B:i:I:C:S:p:k:T:';

async function main(argv: readonly string[]): Promise<number> {
  eagerFeedback();
  const r = new Rstream();
  const args = streamLongOptions(r, argv, 'rstream', usage);
  if (!args) return 1;
  const g = new Getopt(args, OPTSTRING);
  for (let it = g.next(); it; it = g.next()) {
    const a = it.optarg ?? '';
    if (it.opt === 'f') {
      if (a.slice(0, 2).toLowerCase() === 'ip') r.numericHost = true;
      else if (a.slice(0, 3).toLowerCase() === 'gid') {
        r.gidFormat = true;
        r.useRgai = true;
      } else errOut('Warning: unknown address format\n');
    } else if (it.opt === 'k') r.keepalive = atoi(a);
    else if (!r.setOption(it.opt, a)) {
      // an unknown option, or an invalid test option, prints the usage (getopt has already
      // complained about an unknown option or a missing argument on stderr: opterr stays 1)
      if (it.opt === '?') getoptComplaint(progName('rstream'), it, OPTSTRING);
      out(usage(progName('rstream')));
      return 1;
    }
  }
  if (!(r.flags & MSG_DONTWAIT)) r.pollTimeout = -1;
  if (r.useRs) await import('./rdma.js');
  const forkPhase = process.env['RSTREAM_FORK_CHILD'];
  if (forkPhase) return r.runForked(forkPhase);
  return r.run();
}

runMain('rstream', main);
