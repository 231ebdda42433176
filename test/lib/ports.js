// Ports for tests: a TCP port nobody listens on. Test files run in parallel processes, so ports
// are drawn at random below Linux's ephemeral range and checked by binding them.
import net from 'node:net';

const handedOut = new Set();

/** Whether `port` can be bound on the wildcard address (both families). */
function canBind(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen({ port, host: '::', ipv6Only: false, exclusive: true }, () => s.close(() => resolve(true)));
  });
}

/**
 * A TCP port nobody listens on, from 20000-31999 (below Linux's ephemeral range), not handed out
 * before by this process. Test files run in parallel processes, so the start is random.
 */
export async function freePort() {
  for (let i = 0; i < 200; i++) {
    const p = 20000 + Math.floor(Math.random() * 12000);
    if (handedOut.has(p)) continue;
    if (await canBind(p)) {
      handedOut.add(p);
      return p;
    }
  }
  throw new Error('no free port found');
}
