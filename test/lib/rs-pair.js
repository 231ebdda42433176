// A connected rsocket pair on 127.0.0.1 for the rsocket tests, and loops that move a whole buffer
// through it in chunks of chosen sizes (awaiting POLLOUT / POLLIN on EAGAIN).
import { RsConn, RsListener, RS_EAGAIN, POLLIN, POLLOUT } from '../../dist/rsocket/index.js';

/**
 * Listen, connect and accept: `{ l, c, s }`. `listener` and `client` are socket options set
 * before listening / connecting, each `[level, name, value]`.
 */
export async function rsPair({ listener = [], client = [] } = {}) {
  const l = new RsListener();
  for (const [level, name, value] of listener) l.setsockopt(level, name, value);
  l.bind({ address: '127.0.0.1', port: 0 });
  await l.listen(1);
  const accepted = l.accept();
  const c = new RsConn();
  for (const [level, name, value] of client) c.setsockopt(level, name, value);
  await c.connect({ address: '127.0.0.1', port: l.localAddress.port });
  return { l, c, s: await accepted };
}

/** Run `fn({ l, c, s })` on a fresh {@link rsPair}; each socket's close gets 2 s, either way. */
export async function withRsPair(opts, fn) {
  const p = await rsPair(opts);
  try {
    await fn(p);
  } finally {
    const quick = (x) => Promise.race([x.close().catch(() => {}), new Promise((r) => setTimeout(r, 2000).unref())]);
    await quick(p.c);
    await quick(p.s);
    await p.l.close().catch(() => {});
  }
}

/** Chunk sizes: `n` bytes every time. */
export const fixed = (n) => () => n;
/** Chunk sizes: 1..`max` bytes at random. */
export const upTo = (max) => () => 1 + Math.floor(Math.random() * max);

/** Send all of `buf`, each call at most `chunk()` bytes. */
export async function sendAll(conn, buf, chunk) {
  let off = 0;
  while (off < buf.length) {
    const n = conn.send(buf, off, Math.min(buf.length - off, chunk()));
    if (n === RS_EAGAIN) await conn.poll(POLLOUT);
    else off += n;
  }
}

/** Receive until EOF (recv returns 0) or `max` bytes, each call at most `chunk()` bytes. */
export async function recvAll(conn, max, chunk) {
  const out = Buffer.alloc(max);
  let off = 0;
  while (off < max) {
    const n = conn.recv(out, off, Math.min(max - off, chunk()));
    if (n === RS_EAGAIN) await conn.poll(POLLIN);
    else if (n === 0) break;
    else off += n;
  }
  return out.subarray(0, off);
}
