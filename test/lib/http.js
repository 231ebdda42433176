// HTTP over rsockets in tests: servers from rdmacm/http listening on 127.0.0.1 with their
// accepted connections counted, bodies collected and hashed, deterministic payloads.
import { once } from 'node:events';
import { createHash } from 'node:crypto';

/** SHA-256 of a Buffer, hex. */
export const sha = (b) => createHash('sha256').update(b).digest('hex');

/** `n` bytes of a repeatable pattern (seeded, different per seed), fast to make and check. */
export function payload(n, seed = 1) {
  const b = Buffer.allocUnsafe(n);
  let x = seed * 2654435761 >>> 0 || 1;
  for (let i = 0; i < n; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    if (i + 4 <= n) b.writeUInt32LE(x, i);
    else for (let k = i; k < n; k++) b[k] = (x >>> ((k - i) * 8)) & 0xff;
  }
  return b;
}

/** Read a readable to its end as one Buffer (rejects on 'error'). */
export async function body(readable) {
  const parts = [];
  for await (const c of readable) parts.push(c);
  return Buffer.concat(parts);
}

/**
 * Listen on 127.0.0.1, port 0; resolves with the port. Counts the accepted connections in
 * `server.accepted` (an array of the sockets, in order).
 */
export async function listenLocal(server) {
  server.accepted = [];
  server.on('connection', (s) => server.accepted.push(s));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server.address().port;
}

/** Close `server` and resolve once its 'close' came (every connection closed); fails after `ms`. */
export function closeServer(server, ms = 10_000) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`server did not close within ${ms} ms (${server.accepted?.filter((s) => !s.destroyed).length ?? '?'} connections open)`)), ms);
    server.close((err) => {
      clearTimeout(t);
      if (err) reject(err);
      else resolve();
    });
  });
}

/**
 * A handler that answers with a body of `64 * big` bytes, written 1 MiB at a time until the
 * response is destroyed (a client that leaves mid-body); `last()` is the latest response object.
 */
export function endlessResponse(big) {
  let last;
  const handler = async (req, res) => {
    last = res;
    res.on('error', () => {});
    res.setHeader('content-length', 64 * big);
    const chunk = payload(1 << 20, 2);
    while (!res.destroyed) if (!res.write(chunk)) await Promise.race([once(res, 'drain'), once(res, 'close')]);
  };
  return { handler, last: () => last };
}
