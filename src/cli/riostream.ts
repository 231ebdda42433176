#!/usr/bin/env node
/**
 * riostream: zero-copy streaming over RDMA ping-pong test — a port of rdma-core's
 * `librdmacm/examples/riostream.c` (same options, defaults, test series, table and exit codes),
 * with `--json` for one JSON object per result row.
 *
 * Each side riomap()s its buffer for the peer; a test sends `transfer_count` buffers with
 * riowrite() (plain RDMA WRITEs into the peer's mapping, no message), the last one carrying a
 * marker in its final byte, which the receiver polls — in C a busy loop on a volatile byte, here a
 * loop that lets the event loop (which places the peer's writes) run between two looks.
 */
import { eagerFeedback } from './startup.js';
import {
  RsConn,
  RS_EAGAIN,
  RsListener,
  RsState,
  POLLERR,
  POLLHUP,
  POLLIN,
  POLLOUT,
  PROT_WRITE,
  SHUT_RDWR,
  SOL_SOCKET,
  SOL_RDMA,
  IPPROTO_TCP,
  SO_SNDBUF,
  SO_RCVBUF,
  SO_REUSEADDR,
  TCP_NODELAY,
  RDMA_INLINE,
  RDMA_IOMAPSIZE,
  MSG_DONTWAIT,
  MSG_WAITALL,
} from './rs-api.js';
import { Errno, RdmaError, RAI, getDeviceList, getaddrinfo, type SockAddr } from './rdma.js';
import { errOut, out, perrorN, progName, runMain } from './c-compat.js';
import { Getopt, getoptComplaint } from './getopt.js';
import { GaiErr, gaiCode, gaiText } from './addresses.js';
import { HEADER, Optimization, StreamTool, TEST_SIZES, bandwidthPhaseBudget, streamLongOptions } from './stream-tool.js';

function errnoOfErr(e: unknown): number {
  return e instanceof RdmaError ? e.errno : Errno.EIO;
}

/** One event-loop turn (the peer's writes are placed by socket reads). */
function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Everything riostream.c keeps in globals (beyond {@link StreamTool}). */
class Riostream extends StreamTool {
  rs: RsConn | null = null;
  lrs: RsListener | null = null;

  protected override perfTags(): { transport: string; tool: string } {
    return { transport: 'rsocket-iomap', tool: 'riostream' };
  }

  async doPoll(events: number): Promise<number> {
    const c = this.rs as RsConn;
    for (;;) {
      const r = await c.poll(events, this.pollTimeout === 0 ? -1 : this.pollTimeout);
      if (r !== 0) return r & (POLLERR | POLLHUP);
    }
  }

  /** send_msg(): rsend of `size` bytes (the 16-byte sync messages). */
  async sendMsg(size: number): Promise<number> {
    const c = this.rs as RsConn;
    for (let offset = 0; offset < size; ) {
      if (this.useAsync) {
        const r = await this.doPoll(POLLOUT);
        if (r) return r;
      }
      let ret: number;
      try {
        ret = c.send(this.buf, offset, size - offset);
      } catch (e) {
        perrorN('rsend', errnoOfErr(e));
        return -1;
      }
      if (ret > 0) offset += ret;
      else if (!this.useAsync) await c.poll(POLLOUT, -1);
    }
    return 0;
  }

  /** recv_msg(). */
  async recvMsg(size: number): Promise<number> {
    const c = this.rs as RsConn;
    for (let offset = 0; offset < size; ) {
      if (this.useAsync) {
        const r = await this.doPoll(POLLIN);
        if (r) return r;
      }
      let ret: number;
      try {
        ret = c.recv(this.buf, offset, size - offset);
      } catch (e) {
        perrorN('rrecv', errnoOfErr(e));
        return -1;
      }
      if (ret > 0) offset += ret;
      else if (ret === 0) {
        perrorN('rrecv', Errno.ECONNRESET);
        return -1;
      } else if (!this.useAsync) await c.poll(POLLIN, -1);
    }
    return 0;
  }

  /** send_xfer(): riowrite `size` bytes of our buffer into the peer's mapping at offset 0. */
  async sendXfer(size: number): Promise<number> {
    const c = this.rs as RsConn;
    for (let offset = 0; offset < size; ) {
      if (this.useAsync) {
        const r = await this.doPoll(POLLOUT);
        if (r) return r;
      }
      let ret: number;
      try {
        ret = c.riowrite(this.buf, offset, size - offset, offset);
      } catch (e) {
        perrorN('riowrite', errnoOfErr(e));
        return -1;
      }
      if (ret > 0) offset += ret;
      else if (ret === RS_EAGAIN) {
        if (!this.useAsync) await c.poll(POLLOUT, -1);
      } else {
        // No mapping of the peer covers the offset (yet): wait a little for one, or for the
        // connection to end (the next riowrite then fails). No events asked: a poll for POLLIN
        // would be ready at once with data queued or the read side shut, and this loop would
        // then never give the event loop a turn.
        await c.poll(0, 10);
      }
    }
    return 0;
  }

  /** recv_xfer(): wait until the peer's last write set our poll byte to `marker`. */
  async recvXfer(size: number, marker: number): Promise<number> {
    const c = this.rs as RsConn;
    const at = this.transferSize - 1;
    let spins = 0;
    while (this.buf[at] !== marker) {
      if ((++spins & 63) === 0) c.progress();
      if (!(c.state & RsState.connected) || c.error) {
        perrorN('riostream: waiting for the peer', c.error ? c.error.errno : Errno.ECONNRESET);
        return -1;
      }
      await turn();
    }
    if (this.verify) {
      const r = this.pattern.verify(this.buf.subarray(0, size - 1));
      if (r) return r;
    }
    return 0;
  }

  async syncTest(): Promise<number> {
    const ret = this.dstAddr ? await this.sendMsg(16) : await this.recvMsg(16);
    if (ret) return ret;
    return this.dstAddr ? this.recvMsg(16) : this.sendMsg(16);
  }

  /**
   * One iteration of `count` writes each way: the client writes count - 1, then one whose last
   * byte is `marker`, and waits for the server's writes to set its own last byte to marker + 1;
   * the server waits for `marker`, then writes back. The caller advances the marker by 2.
   */
  async iteration(count: number, marker: number): Promise<number> {
    const size = this.transferSize;
    let ret: number;
    if (!this.dstAddr) {
      ret = await this.recvXfer(size, marker);
      if (ret) return ret;
    }
    for (let t = 0; t < count - 1; t++) {
      ret = await this.sendXfer(size);
      if (ret) return ret;
    }
    this.buf[size - 1] = this.dstAddr ? marker : (marker + 1) & 0xff;
    if (this.verify) this.pattern.format(this.buf.subarray(0, size - 1));
    ret = await this.sendXfer(size);
    if (ret || !this.dstAddr) return ret;
    return this.recvXfer(size, (marker + 1) & 0xff);
  }

  async runTest(): Promise<number> {
    const c = this.rs as RsConn;
    let marker = 0;
    const size = this.transferSize;
    const map = this.buf.subarray(0, size);
    this.buf[size - 1] = 0xff;
    try {
      c.riomap(map, PROT_WRITE, 0);
    } catch (e) {
      perrorN('riomap', errnoOfErr(e));
      return -1;
    }
    // The warm-up's blocks end with a marked write each way, as a timed iteration does.
    const block = async (k: number): Promise<number> => {
      const r = await this.iteration(k, marker);
      marker = (marker + 2) & 0xff;
      return r;
    };
    let ret = (await this.warmupBlocks(block)) || (await this.syncTest());
    if (ret) return ret;
    const cpu = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < this.iterations; i++) {
      ret = await block(this.transferCount);
      if (ret) return ret;
    }
    const usec = Number((process.hrtime.bigint() - t0) / 1000n);
    this.showPerf(usec, cpu);
    try {
      c.riounmap(map);
    } catch (e) {
      void e;
      return -1;
    }
    return 0;
  }

  /** set_options(). */
  setOptions(fd: RsConn | RsListener): void {
    const set = (level: number, name: number, v: number): void => {
      try {
        fd.setsockopt(level, name, v);
      } catch {
        /* as the C code: results ignored */
      }
    };
    const b = this.bufferSize ? this.bufferSize : 1 << 19;
    set(SOL_SOCKET, SO_SNDBUF, b);
    set(SOL_SOCKET, SO_RCVBUF, b);
    set(IPPROTO_TCP, TCP_NODELAY, 1);
    set(SOL_RDMA, RDMA_IOMAPSIZE, 1);
    if (this.optimization === Optimization.LATENCY) set(SOL_RDMA, RDMA_INLINE, this.inlineSize);
    else if (this.optimization === Optimization.BANDWIDTH) set(SOL_RDMA, RDMA_INLINE, 0);
  }

  async resolve(node: string | null, passive: boolean): Promise<SockAddr> {
    if (this.gidFormat) throw new GaiErr(-6);
    const r = await getaddrinfo(node, this.port, { flags: (passive ? RAI.PASSIVE : 0) | (this.numericHost ? RAI.NUMERICHOST : 0) });
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
    if (getDeviceList().length === 0) {
      perrorN('rsocket', Errno.ENODEV);
      return -1;
    }
    const l = new RsListener();
    try {
      l.setsockopt(SOL_SOCKET, SO_REUSEADDR, 1);
    } catch (e) {
      perrorN('rsetsockopt SO_REUSEADDR', errnoOfErr(e));
      return -1;
    }
    try {
      l.bind(addr);
    } catch (e) {
      perrorN('rbind', errnoOfErr(e));
      return -1;
    }
    try {
      await l.listen(1);
    } catch (e) {
      perrorN('rlisten', errnoOfErr(e));
      await l.close();
      return -1;
    }
    this.lrs = l;
    return 0;
  }

  async serverConnect(): Promise<number> {
    const l = this.lrs as RsListener;
    this.setOptions(l);
    if (this.useAsync) {
      while (l.pending === 0) await l.poll(POLLIN, -1);
    }
    try {
      this.rs = await l.accept();
    } catch (e) {
      perrorN('raccept', errnoOfErr(e));
      return -1;
    }
    this.setOptions(this.rs);
    return 0;
  }

  async clientConnect(): Promise<number> {
    let dst: SockAddr;
    try {
      dst = await this.resolve(this.dstAddr, false);
    } catch (e) {
      out(`getaddrinfo: ${gaiText(e)}\n`);
      return gaiCode(e);
    }
    if (getDeviceList().length === 0) {
      perrorN('rsocket', Errno.ENODEV);
      return -1;
    }
    const c = new RsConn();
    this.rs = c;
    this.setOptions(c);
    // As riostream.c: the client does not bind to -b ("TODO: bind client to src_addr").
    try {
      await c.connect(dst);
    } catch (e) {
      const en = errnoOfErr(e);
      await c.close();
      this.rs = null;
      if (this.flags & MSG_DONTWAIT) {
        perrorN('rpoll', en);
        return POLLERR;
      }
      perrorN('rconnect', en);
      return -1;
    }
    return 0;
  }

  async closeRs(): Promise<void> {
    const c = this.rs;
    this.rs = null;
    if (!c) return;
    await c.shutdown(SHUT_RDWR).catch(() => {});
    await c.close();
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
      for (const t of TEST_SIZES) {
        if (t.option > this.sizeOption) continue;
        this.initLatencyTest(t.size);
        await this.runTest();
      }
      await this.closeRs();
      this.optimization = Optimization.BANDWIDTH;
      bandwidthPhaseBudget();
      ret = this.dstAddr ? await this.clientConnect() : await this.serverConnect();
      if (ret) return ret;
      for (const t of TEST_SIZES) {
        if (t.option > this.sizeOption) continue;
        this.initBandwidthTest(t.size);
        await this.runTest();
      }
    } else {
      ret = this.dstAddr ? await this.clientConnect() : await this.serverConnect();
      if (ret) return ret;
      ret = await this.runTest();
    }
    await this.closeRs();
    return ret;
  }

  setTestOpt(arg: string): boolean {
    if (arg.length === 1) {
      switch (arg) {
        case 'a':
          this.useAsync = true;
          return true;
        case 'b':
          this.flags = (this.flags & ~MSG_DONTWAIT) | MSG_WAITALL;
          return true;
        case 'n':
          this.flags |= MSG_DONTWAIT;
          return true;
        case 'v':
          this.verify = true;
          return true;
        default:
          return false;
      }
    }
    const pre = (word: string, n: number): boolean => arg.length >= n && arg.slice(0, n).toLowerCase() === word.slice(0, n);
    if (pre('async', 5)) this.useAsync = true;
    else if (pre('block', 5)) this.flags = (this.flags & ~MSG_DONTWAIT) | MSG_WAITALL;
    else if (pre('nonblock', 8)) this.flags |= MSG_DONTWAIT;
    else if (pre('verify', 6)) this.verify = true;
    else return false;
    return true;
  }
}

/** The usage text (stdout), as riostream.c prints it. */
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
    '\t[-T test_option]',
    '\t    a|async - asynchronous operation (use poll)',
    '\t    b|blocking - use blocking calls',
    '\t    n|nonblocking - use nonblocking calls',
    '\t    v|verify - verify data',
    '',
  ].join('\n');
}

/** riostream.c main's getopt string. */
const OPTSTRING = 's:b:f:B:i:I:C:S:p:T:';

async function main(argv: readonly string[]): Promise<number> {
  eagerFeedback();
  const r = new Riostream();
  const args = streamLongOptions(r, argv, 'riostream', usage);
  if (!args) return 1;
  const g = new Getopt(args, OPTSTRING);
  for (let it = g.next(); it; it = g.next()) {
    const a = it.optarg ?? '';
    if (it.opt === 'f') {
      if (a.slice(0, 2).toLowerCase() === 'ip') r.numericHost = true;
      else if (a.slice(0, 3).toLowerCase() === 'gid') r.gidFormat = true;
      else errOut('Warning: unknown address format\n');
    } else if (!r.setOption(it.opt, a)) {
      // getopt (opterr 1) has complained about an unknown option or a missing argument on stderr
      if (it.opt === '?') getoptComplaint(progName('riostream'), it, OPTSTRING);
      out(usage(progName('riostream')));
      return 1;
    }
  }
  if (!(r.flags & MSG_DONTWAIT)) r.pollTimeout = -1;
  return r.run();
}

runMain('riostream', main);
