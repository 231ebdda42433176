/**
 * What udaddy and mckey share: rdma-core gives both the same `struct cmatest_node` and the same
 * copies of `create_message`, `verify_test_params`, `init_node`, `post_recvs`, `post_sends`,
 * `destroy_node` and `poll_cqs` (librdmacm/examples/udaddy.c, mckey.c); here they are one
 * {@link UdTest}, parameterised by the tool's name for its messages.
 *
 * Every node has its own PD, one CQ of `2 × message_count` entries for both directions, a UD QP
 * (`message_count` send and receive WRs, `sq_sig_all` 0) and one buffer of `message_size` plus the
 * 40-byte GRH area that every UD receive fills first. All receives share that buffer, as in C.
 */
import { Errno, Access, GRH_AREA_LEN, QpInitAttrMask, QpType, WrOpcode, SendFlags, strerror, type Ah, type CmEvent, type CmId, type Cq, type EventChannel, type Mr, type Pd, type UdParam, type Wc } from './api.js';
import { errnoFrom, errOut, out, perror, strtoul } from './c-compat.js';
import { cmEventLoop } from './common.js';


/** `struct cmatest_node`. */
export interface UdNode {
  id: number;
  cmaId: CmId | null;
  connected: boolean;
  pd: Pd | null;
  cq: Cq | null;
  mr: Mr | null;
  ah: Ah | null;
  remoteQpn: number;
  remoteQkey: number;
  mem: Buffer | null;
}

/** A fresh node (the C tools `memset` their node array to zero). */
export function newUdNode(id: number): UdNode {
  return { id, cmaId: null, connected: false, pd: null, cq: null, mr: null, ah: null, remoteQpn: 0, remoteQkey: 0, mem: null };
}

/**
 * Waits between empty CQ polls. The C tools spin on `ibv_poll_cq`; here an empty poll yields to
 * the event loop (which runs the device), first at once, then — once nothing has arrived for a
 * while — with a 1 ms timer, so a receiver waiting for a sender that never comes does not keep a
 * core busy.
 */
class PollPause {
  private empty = 0;

  reset(): void {
    this.empty = 0;
  }

  wait(): Promise<void> {
    if (++this.empty < 256) return new Promise((r) => setImmediate(r));
    return new Promise((r) => setTimeout(r, 1));
  }
}

/** The shared state and steps of one run of udaddy or mckey. */
export class UdTest {
  /** `-S`. */
  messageSize = 100;
  /** `-C` (forced to 0 by {@link createMessage} when the size is 0, as in C). */
  messageCount = 10;
  /** The last errno a failing call left (C's `errno`, for `perror` calls that come later). */
  errno = 0;

  /** @param prog the prefix of the tool's messages (`udaddy`, `mckey`). */
  constructor(readonly prog: string) {}

  /** `perror(msg)` with the error's errno, which becomes {@link errno}. */
  perror(msg: string, e: unknown): void {
    this.errno = errnoFrom(e);
    perror(msg, e);
  }

  /** `perror(msg)` of whatever errno the last failure left ({@link errno}; 0 prints `Success`). */
  perrorLast(msg: string): void {
    errOut(`${msg}: ${this.errno ? strerror(this.errno) : 'Success'}\n`);
  }

  /** `create_message()`: the buffer (size + GRH area) and its MR. 0 or -1. */
  createMessage(node: UdNode): number {
    if (!this.messageSize) this.messageCount = 0;
    if (!this.messageCount) return 0;
    const bytes = this.messageSize + GRH_AREA_LEN;
    if (bytes < 0) {
      // malloc() of a negative size_t fails.
      out('failed message allocation\n');
      return -1;
    }
    node.mem = Buffer.alloc(bytes);
    try {
      node.mr = (node.pd as Pd).regMr(node.mem, Access.LOCAL_WRITE);
    } catch (e) {
      this.errno = errnoFrom(e);
      out('failed to reg MR\n');
      node.mem = null;
      return -1;
    }
    return 0;
  }

  /**
   * `verify_test_params()`: with messages to send, `-S` must fit the port's active MTU
   * (`message_size %d is larger than active mtu %d`, -EINVAL). A failed port query returns its
   * errno.
   */
  verifyTestParams(node: UdNode): number {
    const id = node.cmaId as CmId;
    let activeMtu: number;
    try {
      if (!id.verbs) throw Object.assign(new Error('no device'), { errno: Errno.ENODEV });
      activeMtu = id.verbs.queryPort(id.portNum).activeMtu;
    } catch (e) {
      this.errno = errnoFrom(e);
      return this.errno;
    }
    const mtu = 1 << (activeMtu + 7);
    if (this.messageCount && this.messageSize > mtu) {
      out(`${this.prog}: message_size ${this.messageSize} is larger than active mtu ${mtu}\n`);
      return -Errno.EINVAL;
    }
    return 0;
  }

  /**
   * `init_node()`: PD, CQ, the UD QP through `rdma_create_qp`, the message buffer. 0 or a negative
   * value after printing why.
   *
   * `createFlags` are `ibv_qp_init_attr_ex.create_flags`, which mckey -l sets
   * (IBV_QP_CREATE_BLOCK_SELF_MCAST_LB): the QP is then made by `rdma_create_qp_ex` with
   * `comp_mask` CREATE_FLAGS | PD, and the device takes the flag or refuses it (rxe: EOPNOTSUPP).
   */
  initNode(node: UdNode, createFlags = 0): number {
    const id = node.cmaId as CmId;
    try {
      if (!id.verbs) throw new Error('no device');
      node.pd = id.verbs.allocPd();
    } catch (e) {
      this.errno = errnoFrom(e);
      out(`${this.prog}: unable to allocate PD\n`);
      return -Errno.ENOMEM;
    }
    const cqe = this.messageCount ? this.messageCount * 2 : 2;
    try {
      node.cq = id.verbs.createCq(cqe, null, 0, node);
    } catch (e) {
      this.errno = errnoFrom(e);
      out(`${this.prog}: unable to create CQ\n`);
      return -Errno.ENOMEM;
    }
    const wr = this.messageCount ? this.messageCount : 1;
    try {
      const init = {
        cap: { maxSendWr: wr, maxRecvWr: wr, maxSendSge: 1, maxRecvSge: 1 },
        qpContext: node,
        sqSigAll: false,
        qpType: QpType.UD,
        sendCq: node.cq,
        recvCq: node.cq,
      };
      if (createFlags) id.createQpEx({ ...init, compMask: QpInitAttrMask.CREATE_FLAGS | QpInitAttrMask.PD, pd: node.pd, createFlags });
      else id.createQp(node.pd, init);
    } catch (e) {
      this.perror(`${this.prog}: unable to create QP`, e);
      return -1;
    }
    const ret = this.createMessage(node);
    if (ret) out(`${this.prog}: failed to create messages: ${ret}\n`);
    return ret;
  }

  /** `post_recvs()`: `message_count` receives of size + GRH into the one buffer. */
  postRecvs(node: UdNode): number {
    if (!this.messageCount) return 0;
    const mr = node.mr as Mr;
    const wr = { wrId: node.id, sgList: [{ addr: mr.addr, length: this.messageSize + GRH_AREA_LEN, lkey: mr.lkey }] };
    for (let i = 0; i < this.messageCount; i++) {
      try {
        node.cmaId?.qp?.postRecv(wr);
      } catch (e) {
        const ret = (this.errno = errnoFrom(e));
        out(`failed to post receives: ${ret}\n`);
        return ret;
      }
    }
    return 0;
  }

  /**
   * `post_sends()`: `message_count` SEND_WITH_IMM of `message_size` bytes to the node's remote
   * QP (immediate data: our QP number), signaled or not.
   */
  postSends(node: UdNode, signaled: boolean): number {
    if (!node.connected || !this.messageCount) return 0;
    const mr = node.mr as Mr;
    const qp = node.cmaId?.qp;
    if (!qp) return 0;
    const wr = {
      wrId: node.id,
      opcode: WrOpcode.SEND_WITH_IMM,
      sendFlags: signaled ? SendFlags.SIGNALED : 0,
      immData: qp.qpNum,
      ud: { ah: node.ah as Ah, remoteQpn: node.remoteQpn, remoteQkey: node.remoteQkey },
      sgList: [{ addr: mr.addr, length: this.messageSize, lkey: mr.lkey }],
    };
    for (let i = 0; i < this.messageCount; i++) {
      try {
        qp.postSend(wr);
      } catch (e) {
        const ret = (this.errno = errnoFrom(e));
        out(`failed to post sends: ${ret}\n`);
        return ret;
      }
    }
    return 0;
  }

  /**
   * `poll_cqs()`: for every connected node, poll its CQ (8 at a time) until `message_count`
   * completions were taken. `onCompletions` sees every non-empty batch (udaddy builds its reply AH
   * from the first); a non-zero return ends the poll with that value.
   */
  async pollCqs(nodes: readonly UdNode[], onCompletions?: (node: UdNode, wcs: Wc[]) => number): Promise<number> {
    const pause = new PollPause();
    for (const node of nodes) {
      if (!node.connected) continue;
      const cq = node.cq as Cq;
      for (let done = 0; done < this.messageCount; ) {
        let wcs: Wc[];
        try {
          wcs = cq.poll(8);
        } catch (e) {
          const ret = -errnoFrom(e);
          out(`${this.prog}: failed polling CQ: ${ret}\n`);
          return ret;
        }
        if (wcs.length === 0) {
          await pause.wait();
          continue;
        }
        pause.reset();
        if (onCompletions) {
          const rc = onCompletions(node, wcs);
          if (rc) return rc;
        }
        done += wcs.length;
      }
    }
    return 0;
  }

  /**
   * `connect_events()`: each CM event on `channel` to `handle` while `left()` is non-zero and the
   * last handler returned 0. A failing rdma_get_cm_event: -1, its errno kept in {@link errno}.
   */
  connectEvents(channel: EventChannel, left: () => number, handle: (id: CmId, event: CmEvent) => Promise<number>): Promise<number> {
    return cmEventLoop(
      channel,
      left,
      (event) => handle(event.id, event),
      (e) => {
        this.errno = errnoFrom(e);
        return -1;
      },
    );
  }

  /**
   * The peer an ESTABLISHED (SIDR reply) or MULTICAST_JOIN event names: its QP number, its
   * Q_Key and an address handle to it. 0, or -1 after `<prog>: failure creating address handle`.
   */
  setRemote(node: UdNode, param: UdParam): number {
    node.remoteQpn = param.qpNum;
    node.remoteQkey = param.qkey;
    try {
      node.ah = (node.pd as Pd).createAh(param.ahAttr);
    } catch (e) {
      this.errno = errnoFrom(e);
      out(`${this.prog}: failure creating address handle\n`);
      return -1;
    }
    return 0;
  }

  /** `destroy_node()`: AH, QP, CQ, MR, PD, then the id. Errors are not reported (as in C). */
  async destroyNode(node: UdNode): Promise<void> {
    const id = node.cmaId;
    if (!id) return;
    const quiet = (f: () => void): void => {
      try {
        f();
      } catch {
        /* the C tools ignore destroy errors */
      }
    };
    if (node.ah) quiet(() => (node.ah as Ah).destroy());
    if (id.qp) quiet(() => id.destroyQp());
    if (node.cq) quiet(() => (node.cq as Cq).destroy());
    if (node.mem && node.mr) quiet(() => (node.mr as Mr).dereg());
    if (node.pd) quiet(() => (node.pd as Pd).dealloc());
    // The id after all device resources.
    await id.destroy().catch(() => {});
  }
}

/** The usage line both tools print for `-p`: `%#x` of RDMA_PS_UDP and RDMA_PS_IPOIB. */
export const PORT_SPACE_USAGE = '\t[-p port_space - 0x111 for UDP (default), 0x2 for IPOIB]\n';

/** `strtol(optarg, NULL, 0)` stored in an `enum rdma_port_space` (an int). */
export function portSpaceArg(s: string): number {
  return Number(BigInt.asIntN(32, strtoul(s, 0)));
}
