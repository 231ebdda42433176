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
import { settleConnections } from '../../../dist/index.js';
import { Llp } from '../../../dist/transport/iwarp/llp.js';

const WRITER = fileURLToPath(new URL('./fixtures/linger-writer.js', import.meta.url));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

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
  const srv = net.createServer({ pauseOnConnect: true });
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const llp = Llp.connect({ host: '127.0.0.1', port: srv.address().port }, () => {});
  const [sock] = await once(srv, 'connection');
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
