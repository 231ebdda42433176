// A tool that closes a connection and exits at once must not cut off what the connection still
// had to send. The kernel keeps sending from a socket its process closed; Node drops what a
// socket still buffers when the process exits, and a closed socket that then receives anything
// answers with RST, discarding the rest. So graceful closes linger (settleConnections) and the
// tools' exit() waits for them, at most 3 s.
import test from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { existsSync } from 'node:fs';
import { settleConnections } from '../../../../dist/index.js';
import { Llp } from '../../../../dist/transport/iwarp/llp.js';
import { sleep } from '../../../lib/wait.js';

const WRITER = fileURLToPath(new URL('./fixtures/linger-writer.js', import.meta.url));

/**
 * An Llp connected to a loopback server made with `opts` (`pauseOnConnect`: the peer reads
 * nothing until resumed) and, as a 'connection' listener, `onSocket`.
 */
async function llpPair(opts, onSocket) {
  const srv = net.createServer(opts, onSocket);
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const llp = Llp.connect({ host: '127.0.0.1', port: srv.address().port }, () => {});
  const [sock] = await once(srv, 'connection');
  return { srv, llp, sock };
}

test('exit() right after a graceful close: the peer still gets every byte, even if it talks back late', async () => {
  const TOTAL = 32 * 1024 * 1024;
  const srv = net.createServer({ pauseOnConnect: true });
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const child = spawn(process.execPath, [WRITER, String(srv.address().port), String(TOTAL)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  try {
    const [sock] = await once(srv, 'connection');
    // Read nothing for a while (the writer has long written and closed by then), then say
    // something, as a receiver's late credit update does, and read all.
    await sleep(400);
    sock.write(Buffer.alloc(64, 1));
    let got = 0;
    let error = null;
    sock.on('data', (b) => {
      got += b.length;
    });
    sock.on('error', (e) => {
      error = e;
    });
    sock.resume();
    await once(sock, 'close');
    const [code] = child.exitCode === null ? await once(child, 'exit') : [child.exitCode];
    assert.equal(error, null, `the writer reset the connection after ${got} of ${TOTAL} bytes`);
    assert.equal(got, TOTAL);
    assert.equal(code, 0);
  } finally {
    clearTimeout(killer);
    child.kill('SIGKILL');
    srv.close();
  }
});

test('settleConnections: resolves when gracefully closed connections are gone, or at its timeout', async () => {
  await settleConnections(10); // nothing pending: at once
  const { srv, llp, sock } = await llpPair({ pauseOnConnect: true });
  llp.write(Buffer.alloc(16 * 1024 * 1024));
  llp.end();
  // The peer reads nothing: the close cannot finish, so settling ends at its timeout.
  let settled = false;
  const t0 = Date.now();
  await settleConnections(300).then(() => {
    settled = true;
  });
  assert.ok(settled && Date.now() - t0 >= 250, 'settle waited for its timeout');
  // Now the peer reads everything and closes: settling ends when our socket closes.
  const p = settleConnections(10_000);
  let got = 0;
  sock.on('data', (b) => {
    got += b.length;
  });
  sock.on('end', () => sock.end());
  sock.resume();
  const t1 = Date.now();
  await p;
  assert.equal(got, 16 * 1024 * 1024);
  assert.ok(Date.now() - t1 < 5000);
  srv.close();
});

// A graceful close queues its FIN only once TCP has sent every byte written before it, so that
// the FIN never rides in the segment that carries the last data: Linux siw handles the FIN of
// such a segment before its data and can lose that data (see Llp.end). Knowing what is unsent
// takes the netopt addon (SIOCOUTQNSD); without it the FIN follows the data at once.
const haveNetopt = existsSync(fileURLToPath(new URL('../../../../native/build/netopt.node', import.meta.url)));
const noAddon = haveNetopt ? false : 'the netopt addon is not built here (no C compiler or Node headers)';

test('graceful close: no FIN while data waits in the kernel for the peer window; then FIN behind it', { skip: noAddon }, async () => {
  // 1 MiB: all of it in the kernel (nothing left in Node's buffer), not all of it sent.
  const TOTAL = 1024 * 1024;
  const { srv, llp, sock } = await llpPair({ pauseOnConnect: true });
  try {
    llp.write(Buffer.alloc(TOTAL, 7));
    llp.end();
    // The peer reads nothing: its window closes with part of the data still unsent.
    await sleep(300);
    assert.equal(llp.socket.writableLength, 0, 'the kernel took every byte');
    assert.equal(llp.socket.writableEnded, false, 'FIN queued behind unsent data');
    let got = 0;
    sock.on('data', (b) => {
      got += b.length;
    });
    const ended = once(sock, 'end');
    const t0 = Date.now();
    sock.resume();
    await ended;
    assert.equal(got, TOTAL);
    assert.ok(Date.now() - t0 < 1500, `FIN ${Date.now() - t0} ms after the peer took the data`);
    assert.equal(llp.socket.writableEnded, true);
  } finally {
    sock.destroy();
    srv.close();
  }
});

test('graceful close: a peer whose window stays shut gets the FIN queued after 2 s, and the socket is gone after 3 s', { skip: noAddon }, async () => {
  const { srv, llp, sock } = await llpPair({ pauseOnConnect: true });
  try {
    llp.write(Buffer.alloc(1024 * 1024));
    const t0 = Date.now();
    llp.end();
    await sleep(1700);
    assert.equal(llp.socket.writableLength, 0, 'the kernel took every byte');
    assert.equal(llp.socket.writableEnded, false);
    await sleep(600);
    assert.equal(llp.socket.writableEnded, true, 'FIN after the 2 s wait');
    await once(llp.socket, 'close');
    const ms = Date.now() - t0;
    assert.ok(ms >= 2900 && ms < 4500, `closed after ${ms} ms`);
  } finally {
    sock.destroy();
    srv.close();
  }
});

test('graceful close: with everything sent the FIN is queued at once, acknowledged or not', async () => {
  // The peer answers each message, so its TCP delays its ACKs (to send them with an answer):
  // a close that waited for the acknowledgement would take some 40 ms here.
  const { srv, llp, sock } = await llpPair({}, (s) => s.on('data', (b) => b[0] === 1 && s.write(Buffer.alloc(64, 2))));
  try {
    let answers = 0;
    llp.setConsumer((b, start, end) => {
      answers += (end - start) / 64;
    });
    for (let i = 1; i <= 5; i++) {
      llp.write(Buffer.alloc(64, 1));
      while (answers < i) await sleep(1);
    }
    let got = 0;
    sock.on('data', (b) => {
      got += b.length;
    });
    llp.write(Buffer.alloc(1000, 3));
    llp.end();
    assert.equal(llp.socket.writableEnded, true, 'FIN queued in the same call');
    await once(sock, 'end');
    assert.equal(got, 1000);
  } finally {
    sock.destroy();
    srv.close();
  }
});
