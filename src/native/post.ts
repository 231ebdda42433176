/**
 * Posting work requests through the addon, for a QP's send and receive queues and an SRQ: each WR
 * checked by the verbs layer (wr-check.ts, against the native provider's caps), encoded into the
 * scratch shared with the addon (abi.ts) and handed to rdma-core in batches.
 */
import { PostError, RdmaError } from '../errors.js';
import type { ErrnoCode } from '../errno.js';
import type { Pd } from '../verbs/pd.js';
import type { RecvWr, SendWr } from '../verbs/types.js';
import { checkRecvWr, type WrRules } from '../verbs/wr-check.js';
import { SGE_BASE, SGE_MAX, SGE_WORDS, WR_MAX, WR_STATUS_WORD, WR_WORDS, encodeRecvWr } from './abi.js';
import { scratchBuffers, type Handle, type NativeBinding, type Scratch } from './binding.js';

/**
 * Check (unless `checked`: the builder's batch, checked already), encode and post the first
 * `limit` of `wrs` to the queue `h` (a QP's or an SRQ's) in batches of what one addon call
 * carries (WR_MAX WRs, SGE_MAX SGEs). A provider error names the first WR it did not post,
 * counted over the whole list; a WR refused here is thrown after the ones before it are posted.
 */
export function postWrs<T extends SendWr | RecvWr, H>(b: NativeBinding, h: H, path: PostPath<T, H>, rules: WrRules, pd: Pd, wrs: T | readonly T[], checked = false, limit = Infinity): void {
  const op = path.op;
  const many = Array.isArray(wrs);
  const list = wrs as readonly T[];
  const count = many ? Math.min(list.length, limit) : 1;
  const s = scratchBuffers();
  const w = s.wr;
  const f = s.wrF64;
  let i = 0;
  while (i < count) {
    const start = i;
    let n = 0;
    let sge = 0;
    let bad: string | null = null;
    for (; i < count && n < WR_MAX; i++) {
      const wr = many ? (list[i] as T) : (wrs as T);
      const length = checked ? 0 : path.check(wr, rules, pd);
      if (typeof length === 'string') {
        bad = length;
        break;
      }
      if (sge + wr.sgList.length > SGE_MAX) break;
      sge = path.encode(w, f, n, sge, wr);
      n++;
    }
    if (n > 0) {
      const rc = path.post(b, h, n);
      if (rc < 0) throw postError(-rc, op, start + (w[WR_STATUS_WORD] as number));
    }
    if (bad !== null) throw new PostError('EINVAL', op, i, bad);
  }
}

/**
 * Check, encode and post the one WR `wr` (not a list) to the queue `h`: {@link postWrs} for a
 * list of one, without its batching loop — the data path's common call. The same errors: a WR
 * refused here is a PostError at index 0, a provider error names the WR libibverbs' `bad_wr`
 * points at (index 0).
 */
export function postOne<T extends SendWr | RecvWr, H>(b: NativeBinding, h: H, path: PostPath<T, H>, rules: WrRules, pd: Pd, wr: T, s: Scratch): void {
  const length = path.check(wr, rules, pd);
  if (typeof length === 'string') throw new PostError('EINVAL', path.op, 0, length);
  path.encode(s.wr, s.wrF64, 0, 0, wr);
  const rc = path.post(b, h, 1);
  if (rc < 0) throw postError(-rc, path.op, s.wr[WR_STATUS_WORD] as number);
}

/** Part of a prepared list in the addon's words: WRs `start..start+n` and their SGEs. */
export interface EncodedChunk {
  readonly start: number;
  readonly n: number;
  /** The WRs' words, SGE slots counted from 0. */
  readonly wr: Uint32Array;
  /** Their SGEs' words. */
  readonly sge: Uint32Array;
}

/**
 * A prepared list (checked already) in the addon's words, in chunks of what one addon call
 * carries — what {@link postWrs} writes into the scratch, kept. Encoded through the scratch,
 * which is free between calls.
 */
export function encodeChunks<T extends SendWr | RecvWr, H>(path: PostPath<T, H>, wrs: readonly T[], s: Scratch): EncodedChunk[] {
  const w = s.wr;
  const chunks: EncodedChunk[] = [];
  let i = 0;
  while (i < wrs.length) {
    const start = i;
    let n = 0;
    let sge = 0;
    for (; i < wrs.length && n < WR_MAX; i++) {
      const wr = wrs[i] as T;
      if (sge + wr.sgList.length > SGE_MAX) break;
      sge = path.encode(w, s.wrF64, n, sge, wr);
      n++;
    }
    chunks.push({ start, n, wr: w.slice(0, n * WR_WORDS), sge: w.slice(SGE_BASE, SGE_BASE + sge * SGE_WORDS) });
  }
  return chunks;
}

/** Post encoded chunks to the queue `h`: each copied into the scratch and handed to the addon; errors as {@link postWrs}'. */
export function postChunks<T extends SendWr | RecvWr, H>(b: NativeBinding, h: H, path: PostPath<T, H>, chunks: readonly EncodedChunk[], s: Scratch): void {
  const w = s.wr;
  for (let k = 0; k < chunks.length; k++) {
    const c = chunks[k] as EncodedChunk;
    w.set(c.wr, 0);
    if (c.sge.length > 0) w.set(c.sge, SGE_BASE);
    const rc = path.post(b, h, c.n);
    if (rc < 0) throw postError(-rc, path.op, c.start + (w[WR_STATUS_WORD] as number));
  }
}

/**
 * One direction of posting: its call's name, its checks, its encoding, its addon call on the
 * queue `h` (an SRQ's handle; a QP's slot, see binding.ts `dataSlot`).
 */
export interface PostPath<T, H = Handle> {
  readonly op: string;
  check(wr: T, rules: WrRules, pd: Pd): number | string;
  encode(w: Uint32Array, f: Float64Array, n: number, sge: number, wr: T): number;
  post(b: NativeBinding, h: H, n: number): number;
}

/** `ibv_post_srq_recv`: receive WRs, checked and encoded as a QP's, posted to an SRQ. */
export const SRQ_RECV_PATH: PostPath<RecvWr> = {
  op: 'ibv_post_srq_recv',
  check: (wr, rules) => checkRecvWr(wr, rules),
  encode: encodeRecvWr,
  post: (b, h, n) => b.postSrqRecv(h, n),
};

function postError(errno: number, op: string, index: number): PostError {
  const e = RdmaError.fromErrno(errno);
  return new PostError(e.code as ErrnoCode, op, index);
}
