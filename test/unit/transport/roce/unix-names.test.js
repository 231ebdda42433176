// The names through which the processes sharing a RoCE port find each other
// (src/transport/roce/unix-names.ts): the directory read from /proc/net/unix lists the QPN blocks
// and services held on a port, by user — as Node binds them (names padded with NULs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { blockSocketName, serviceSocketName, readDirectory, uidOfBlockName, PROCESS_UID } from '../../../../dist/transport/roce/unix-names.js';

test('the directory lists the blocks and services listened on, with their users; other ports and closed names are not listed', { skip: process.platform !== 'linux' && 'reads /proc/net/unix' }, async () => {
  const port = 20000 + Math.floor(Math.random() * 30000);
  const names = [blockSocketName(port, PROCESS_UID, 17), blockSocketName(port, 4242, 17), blockSocketName(port, PROCESS_UID, 16382), serviceSocketName(port, '0000000001060457'), blockSocketName(port + 1, PROCESS_UID, 5)];
  const servers = [];
  for (const n of names) {
    const s = net.createServer().listen(n);
    await once(s, 'listening');
    servers.push(s);
  }
  try {
    const d = readDirectory(port);
    assert.deepEqual([...d.blocks.keys()].sort((a, b) => a - b), [17, 16382]);
    assert.deepEqual(d.blocks.get(17).sort(), [PROCESS_UID, 4242].sort());
    assert.deepEqual(d.blocks.get(16382), [PROCESS_UID]);
    assert.deepEqual([...d.services], ['0000000001060457']);
    assert.equal(uidOfBlockName(names[1]), 4242);
    servers[0].close();
    servers[3].close();
    await new Promise((r) => setTimeout(r, 20));
    const e = readDirectory(port);
    assert.deepEqual(e.blocks.get(17), [4242]);
    assert.equal(e.services.size, 0);
  } finally {
    for (const s of servers) s.close();
  }
});
