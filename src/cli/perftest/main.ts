/**
 * One perftest tool run (the `main` of perftest's write_bw.c, send_bw.c, read_bw.c, atomic_bw.c,
 * send_lat.c, write_lat.c, read_lat.c, atomic_lat.c): parse, open the device, meet the peer on
 * the side channel (versions, system data, MTU), create the QPs, exchange their keys and connect
 * them, synchronise, run the measured loop for each size, print the rows, exchange the reports
 * and close. The tools differ in where they synchronise ({@link Shape}).
 */
import { errOut, out } from '../c-compat.js';
import {
  SideChannel,
  decodeDest,
  decodeMtu,
  encodeDest,
  encodeMtu,
  encodeVersion,
  versionNumber,
  xchgBwReports,
  DONE_MSG,
  ExchangeError,
  KEY_MSG_SIZE,
  KEY_MSG_SIZE_GID,
  type PerfDest,
} from './exchange.js';
import { MAX_SIZE_LOG2, PERFTEST_VERSION, Test, Verb, parsePerfArgs, type PerfParams } from './params.js';
import { RESULT_LINE, bwFigures, bwHeader, bwRow, destLines, latDurationRow, latHeader, latRow, testInfo } from './report.js';
import {
  DEF_CACHE_LINE_SIZE,
  DEF_PAGE_SIZE,
  connectQps,
  createResources,
  localDest,
  mtuBytes,
  openDevice,
  v4Mapped,
  type Device,
  type Resources,
} from './resources.js';
import { cmAwaitPeerDisconnect, cmClient, cmDisconnect, cmListen, cmServer, type CmLink } from './cm.js';
import { Credits } from './credit.js';
import { CmChannel, PINGPONG_DEST_SIZE, decodeDestBinary, encodeDestBinary } from './cm-channel.js';
import { LoopError, runLatDuration, postRecvs, runIterBw, runIterBwServer, runIterLat, runIterLatSend, runIterLatWrite } from './loops.js';

/** How long a client's rdma_cm side channel waits for the server to end it (see CmChannel.closeAfterPeer). */
const CLOSE_WAIT_MS = 5000;
/** How long a server with -R waits for its client to disconnect the test's connections first (cm.ts cmAwaitPeerDisconnect). */
const PEER_CLOSE_WAIT_MS = 5000;
/** How long one side-channel read waits for the peer once connected. */
const SIDE_TIMEOUT_MS = 60_000;
/** Peers older than this are refused (`check_version_compatibility`). */
const MIN_PEER_VERSION = 5.7;
/** perftest's exit status for a failure (`FAILURE`). */
const FAILURE = 1;

/** A side of a run, as far as the exchange order goes. */
interface Run {
  p: PerfParams;
  d: Device;
  r: Resources;
  ch: SideChannel | CmChannel;
  mine: PerfDest[];
  rem: PerfDest[];
  withGid: boolean;
  /** `my_dest.gid_index`, which the rdma_cm channel's key record carries. */
  gidIndex: number;
  remVersion: number;
  /** send_bw over iWARP: the receiver's counts (credit.ts). */
  credits: Credits | null;
}

/** `ctx_hand_shake` of QP `i`'s keys (the records of QP 0 serve as the barrier). */
async function handShake(run: Run, i = 0): Promise<void> {
  if (run.ch instanceof CmChannel) {
    const b = await run.ch.xchg(encodeDestBinary(run.mine[i] as PerfDest, run.gidIndex), PINGPONG_DEST_SIZE);
    run.rem[i] = decodeDestBinary(b);
    return;
  }
  const size = run.withGid ? KEY_MSG_SIZE_GID : KEY_MSG_SIZE;
  const b = await run.ch.xchg(encodeDest(run.mine[i] as PerfDest, run.withGid), size);
  run.rem[i] = decodeDest(b, run.withGid);
}

/**
 * `ctx_close_connection`: a last hand shake, then "done" on the TCP channel, which closes. An
 * rdma_cm channel stays up until the test's connections are down (see {@link perftestMain}).
 */
async function closeConnection(run: Run): Promise<void> {
  await handShake(run);
  if (run.ch instanceof SideChannel) {
    run.ch.write(DONE_MSG);
    run.ch.close();
  }
}

/** The sizes of the run: `-a` runs 2 .. 2^23 (UD: up to the path MTU). */
function sizes(p: PerfParams, mtu: number): number[] {
  if (!p.all || p.verb === Verb.ATOMIC) return [p.size];
  const top = p.conn === 'UD' ? Math.log2(mtuBytes(mtu)) : MAX_SIZE_LOG2;
  const r: number[] = [];
  for (let i = 1; i <= top; i++) r.push(2 ** i);
  return r;
}

/** The bandwidth tools but SEND (write_bw.c, read_bw.c, atomic_bw.c): only the client posts. */
async function bwRdma(run: Run, list: number[]): Promise<void> {
  const { p } = run;
  out(bwHeader(p));
  if (run.ch.isClient === false) {
    await handShake(run);
    const rep = await xchgBwReports(run.ch, { size: 0n, iters: 0n, bwPeak: 0, bwAvg: 0, msgRate: 0 }, run.remVersion);
    out(bwRow(p, rep));
    await closeConnection(run);
    out(RESULT_LINE);
    return;
  }
  let last = { size: 0n, iters: 0n, bwPeak: 0, bwAvg: 0, msgRate: 0 };
  for (const size of list) {
    const t = await runIterBw(p, run.r, run.rem, size);
    last = bwFigures(p, size, t.tposted, t.tcompleted, t.n, p.duration > 0 || p.iters > 20000);
    out(bwRow(p, last));
  }
  out(RESULT_LINE);
  await handShake(run);
  await xchgBwReports(run.ch, last, run.remVersion);
  await closeConnection(run);
}

/** send_bw.c: the server takes the messages and prints its own row too. */
async function bwSend(run: Run, list: number[]): Promise<void> {
  const { p } = run;
  out(bwHeader(p));
  for (const size of list) {
    if (!run.ch.isClient) postRecvs(p, run.r, size, p.rxDepth);
    await handShake(run);
    run.credits?.reset();
    const t = run.ch.isClient ? await runIterBw(p, run.r, run.rem, size, run.credits) : await runIterBwServer(p, run.r, size, run.credits);
    out(bwRow(p, bwFigures(p, size, t.tposted, t.tcompleted, t.n, !run.ch.isClient || p.duration > 0 || p.iters > 20000)));
    if (p.all) await handShake(run);
  }
  out(RESULT_LINE);
  await closeConnection(run);
}

/** The latency tools: a ping-pong (SEND, WRITE) or the client alone (READ, ATOMIC). */
async function lat(run: Run, list: number[]): Promise<void> {
  const { p } = run;
  const clientOnly = p.verb === Verb.READ || p.verb === Verb.ATOMIC;
  // write_lat.c, read_lat.c, atomic_lat.c: one more hand shake before the run (send_lat.c has
  // its own, per size, once the receives are posted).
  if (p.verb !== Verb.SEND) await handShake(run);
  if (clientOnly && !run.ch.isClient) {
    // read_lat.c / atomic_lat.c: the server only waits for the client to finish.
    await closeConnection(run);
    out(RESULT_LINE);
    return;
  }
  out(latHeader(p));
  for (const size of list) {
    if (p.verb === Verb.SEND) {
      postRecvs(p, run.r, size, p.rxDepth);
      await handShake(run);
    }
    const rem = run.rem[0] as PerfDest;
    if (p.duration > 0) {
      const d = await runLatDuration(p, run.r, rem, size, run.ch.isClient);
      out(latDurationRow(p, size, d.iters, d.seconds));
      continue;
    }
    const t =
      p.verb === Verb.SEND
        ? await runIterLatSend(p, run.r, rem, size, run.ch.isClient)
        : p.verb === Verb.WRITE
          ? await runIterLatWrite(p, run.r, rem, size, run.ch.isClient)
          : await runIterLat(p, run.r, rem, size);
    out(latRow(p, size, t, p.iters));
  }
  out(RESULT_LINE);
  // write_lat.c ends without ctx_close_connection: each side just goes.
  if (p.verb !== Verb.WRITE) await closeConnection(run);
  else if (run.ch instanceof SideChannel) run.ch.close();
}

/** Meet the peer: `establish_connection`, `exchange_versions`, `check_sys_data`, `check_mtu`. */
async function meet(p: PerfParams, d: Device): Promise<{ ch: SideChannel | CmChannel; remVersion: number; mtu: number; cycle: number } | number> {
  let ch: SideChannel | CmChannel;
  if (p.rdmaCm) {
    // -R: the side channel is an rdma_cm connection too (establish_connection with use_rdma_cm).
    if (p.servername === null) out('\n************************************\n* Waiting for client to connect... *\n************************************\n');
    try {
      ch = p.servername !== null ? await CmChannel.connect(p.servername, p.port, SIDE_TIMEOUT_MS) : await CmChannel.accept(p.port, SIDE_TIMEOUT_MS);
    } catch {
      errOut(p.servername !== null ? ' Unable to perform rdma_client function\n' : ' Unable to perform rdma_server function\n');
      errOut(' Unable to init the socket connection\n');
      return FAILURE;
    }
  } else if (p.servername !== null) {
    try {
      ch = await SideChannel.connect(p.servername, p.port, SIDE_TIMEOUT_MS);
    } catch {
      errOut(`Couldn't connect to ${p.servername}:${p.port}\n`);
      errOut('Unable to open file descriptor for socket connection');
      errOut(' Unable to init the socket connection\n');
      return FAILURE;
    }
  } else {
    out('\n************************************\n* Waiting for client to connect... *\n************************************\n');
    try {
      ch = await SideChannel.accept(p.port, SIDE_TIMEOUT_MS);
    } catch {
      errOut(`Couldn't listen to port ${p.port}\n`);
      errOut('Unable to open file descriptor for socket connection');
      errOut(' Unable to init the socket connection\n');
      return FAILURE;
    }
  }
  const remVersion = versionNumber(await ch.xchg(encodeVersion(PERFTEST_VERSION)));
  if (remVersion < MIN_PEER_VERSION) {
    errOut('Current implementation is not compatible with versions older than 5.70\n');
    ch.close();
    return FAILURE;
  }
  const int = (v: number): Buffer => {
    const b = Buffer.alloc(4);
    b.writeInt32BE(v);
    return b;
  };
  const remCycle = (await ch.xchg(int(DEF_PAGE_SIZE))).readInt32BE();
  const remLine = (await ch.xchg(int(DEF_CACHE_LINE_SIZE))).readInt32BE();
  void remLine;
  const cycle = Math.max(DEF_PAGE_SIZE, remCycle);
  // set_mtu: -m when the port allows it, else the port's active MTU; then the smaller of the two sides'.
  const byBytes: Record<number, number> = { 256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5 };
  let mine = d.port.activeMtu as number;
  if (p.mtu !== 0) {
    const want = byBytes[p.mtu];
    if (want === undefined) {
      errOut(` Invalid MTU - ${p.mtu} \n Please choose mtu from {256,512,1024,2048,4096}\n Will run with the port active mtu - ${mine}\n`);
    } else if (want > mine) {
      out(`Requested mtu is higher than active mtu \nChanging to active mtu - ${mine}\n`);
    } else mine = want;
  }
  const remMtu = decodeMtu(await ch.xchg(encodeMtu(mine)));
  const mtu = remMtu >= 1 && remMtu <= 5 && mine > remMtu ? remMtu : mine;
  return { ch, remVersion, mtu, cycle };
}

/** The checks `check_mtu` and the tools' mains make once the MTU is known; false after the message. */
function checkRun(p: PerfParams, mtu: number): boolean {
  if (p.conn === 'UD' && p.size > mtuBytes(mtu)) {
    if (p.all || !p.reqSize) {
      errOut(` Max msg size in UD is MTU ${mtuBytes(mtu)}\n Changing to this MTU\n`);
      p.size = mtuBytes(mtu);
    } else {
      errOut(' Max message size in UD cannot be greater than MTU \n');
      errOut(" Couldn't get context for the device\n");
      return false;
    }
  }
  return true;
}

/** Run one tool; resolves with the exit status. */
export async function perftestMain(prog: string, verb: Verb, tst: Test, argv: string[]): Promise<number> {
  const parsed = parsePerfArgs(prog, verb, tst, argv);
  if ('exit' in parsed) {
    if (parsed.exit !== 0 && !parsed.quiet) {
      errOut(' Parser function exited with Error\n');
    }
    return parsed.exit;
  }
  const p = parsed.params;
  const d = openDevice(p);
  if (d === null) return FAILURE;
  const met = await meet(p, d);
  if (typeof met === 'number') return met;
  const { ch, remVersion, mtu, cycle } = met;
  try {
    if (!checkRun(p, mtu)) return FAILURE;
    const list = sizes(p, mtu);
    let r: Resources | null;
    let link: CmLink | null = null;
    if (p.rdmaCm) {
      // create_rdma_cm_connection: a hand shake of blank keys (their GID layout) on each side of
      // the CM's connection.
      const blank = { lid: 0, outReads: 0, qpn: 0, psn: 0, rkey: 0, vaddr: 0n, gid: new Uint8Array(16), srqn: 0 };
      const sync: Run = { p, d, r: null as unknown as Resources, ch, mine: [blank], rem: [], withGid: true, gidIndex: 0, remVersion, credits: null };
      // The server listens before the hand shake (cm.ts cmListen says why).
      const listenId = ch.isClient ? null : await cmListen(p);
      if (!ch.isClient && listenId === null) {
        errOut('Failed to create RDMA CM connection with resources.\n');
        return FAILURE;
      }
      await handShake(sync);
      link = listenId === null ? await cmClient(p, Math.max(...list), cycle) : await cmServer(p, listenId, Math.max(...list), cycle);
      if (link === null) {
        errOut('Failed to create RDMA CM connection with resources.\n');
        return FAILURE;
      }
      await handShake(sync);
      r = link.r;
    } else r = createResources(p, d.ctx, Math.max(...list), cycle);
    if (r === null) return FAILURE;
    const res = r;
    const mine = res.qps.map((_, i) => localDest(p, d, res, i));
    out(testInfo(p, { devName: d.name, transport: d.transport, linkLayer: d.linkLayer, mtuBytes: mtuBytes(mtu), inlineSize: r.inlineSize, outReads: r.outReads, gidIndex: d.gidIndex }));
    // send_bw.c: over iWARP the keys name the credit words (credit.ts).
    let credits: Credits | null = null;
    if (tst === Test.BW && verb === Verb.SEND && d.transport === 'IW') {
      credits = Credits.alloc(p.numQps, res.pd, p.rxDepth);
      if (credits === null) return FAILURE;
      mine.forEach((m, i) => credits!.advertise(m, i));
    }
    const run: Run = { p, d, r: res, ch, mine, rem: [], withGid: d.gidIndex !== -1, gidIndex: d.gidIndex, remVersion, credits };
    for (let i = 0; i < mine.length; i++) await handShake(run, i);
    credits?.setWrs(run.rem);
    if (!p.rdmaCm) {
      if (run.withGid && v4Mapped(mine[0]!.gid) !== v4Mapped(run.rem[0]!.gid)) {
        errOut('\n Found Incompatibility issue with GID types.\n Please Try to use a different IP version.\n\n');
        return FAILURE;
      }
      if (!connectQps(p, d, res, mine, run.rem, mtu)) return FAILURE;
    }
    const bwRdmaShape = tst === Test.BW && verb !== Verb.SEND;
    if (!bwRdmaShape) await handShake(run);
    // ctx_print_pingpong_data prints per the side channel's verb: with -R that channel's, SEND
    // (create_comm_struct), so no rkey, address or out reads.
    const shown = p.rdmaCm ? Verb.SEND : verb;
    for (const m of mine) out(destLines('local', m, shown, d.gidIndex));
    for (let i = 0; i < mine.length; i++) {
      await handShake(run, i);
      out(destLines('remote', run.rem[i]!, shown, d.gidIndex));
    }
    if (bwRdmaShape) await handShake(run);
    if (tst === Test.BW && verb !== Verb.SEND) await bwRdma(run, list);
    else if (tst === Test.BW) await bwSend(run, list);
    else await lat(run, list);
    // As perftest's mains end with -R: destroy_ctx of the test (rdma_cm_disconnect_nodes: each
    // connection disconnected and its DISCONNECTED awaited; UD ids have none), then of the side
    // channel. Both perftest ends do that right after their closing hand shake, and the server's
    // own last SEND has completed by then (CmChannel.write waits for it); the client's last SEND
    // has completed only once the client goes on. So the server first waits, bounded, for the
    // client to disconnect the test connections (cmAwaitPeerDisconnect), which it does only after
    // that SEND's completion: over siw a side channel dropped under a SEND still being completed
    // fails it with IBV_WC_LOC_QP_OP_ERR, perftest's "Bad wc status 2". The client never waits for
    // the server's test disconnect (it starts its own), and waits for the server's side-channel
    // close only (closeAfterPeer), which the server makes without waiting for the client's: the
    // two never wait for each other.
    if (link) {
      if (!ch.isClient) await cmAwaitPeerDisconnect(p, link, PEER_CLOSE_WAIT_MS);
      await cmDisconnect(p, link);
    }
    if (ch instanceof CmChannel) {
      if (ch.isClient) await ch.closeAfterPeer(CLOSE_WAIT_MS);
      else ch.close();
    }
    return 0;
  } catch (e) {
    if (e instanceof LoopError) errOut(e.lines);
    else if (e instanceof ExchangeError) errOut(`${e.message}\n Failed to exchange data between server and clients\n`);
    else errOut(` Failed to exchange data between server and clients (${(e as Error).message})\n`);
    ch.close();
    return FAILURE;
  }
}
