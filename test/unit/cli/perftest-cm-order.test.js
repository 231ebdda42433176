// perftest's `-R` with several QPs (src/cli/perftest/cm.ts): the client makes its connections one
// after the other, the next once the one before is up (perftest's client connects each id from
// its ROUTE_RESOLVED, and over siw rdma_connect returns only once the TCP connection is up), so
// a server that refuses sees one request per attempt and never a second connection it would
// then see dropped; the server accepts each request as it comes (rdma_cm_connection_request_handler).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cmClient, cmListen, cmServer, cmDisconnect } from '../../../dist/cli/perftest/cm.js';
import { parsePerfArgs, Verb, Test } from '../../../dist/cli/perftest/params.js';
import { releaseResources } from '../../../dist/cli/perftest/resources.js';
import { createId, PortSpace } from '../../../dist/cli/api.js';
import { forEachDevice, Cap } from '../../lib/devices.js';
import { freePort } from '../../lib/ports.js';

/** perftest's client tries this many times (`rdma_cm_client_connection`'s max_retries). */
const CLIENT_RETRIES = 10;

const params = (d, port, client) =>
  parsePerfArgs('ib_write_bw', Verb.WRITE, Test.BW, ['-R', '-q', '2', '-d', d.name, '-p', String(port), ...(client ? ['127.0.0.1'] : [])]).params;

forEachDevice([Cap.RC, Cap.CM_TCP], (d) => {
  test('-R -q 2, a server that rejects every request: one request per attempt, ten attempts, then perftest\'s line', { timeout: 30_000 }, async (t) => {
    const port = await freePort();
    const listen = createId(null, null, PortSpace.TCP);
    listen.bindAddr({ address: '127.0.0.1', port });
    await listen.listen(4);
    let requests = 0;
    const serving = (async () => {
      for (;;) {
        let id;
        try {
          id = await listen.getRequest();
        } catch {
          return; // the listener is gone
        }
        requests++;
        id.reject();
        await id.destroy();
      }
    })();
    const err = [];
    t.mock.method(process.stderr, 'write', (s) => {
      err.push(String(s));
      return true;
    });
    let link;
    try {
      link = await cmClient(params(d, port, true), 4096, 4096);
    } finally {
      t.mock.restoreAll();
      await listen.destroy();
      await serving;
    }
    assert.equal(link, null);
    assert.equal(err.join(''), `Failed to connect RDMA CM client, tried ${CLIENT_RETRIES} times.\n`);
    assert.equal(requests, CLIENT_RETRIES, 'the second connection of an attempt is made only once the first is up');
  });

  test('-R -q 2 against the server: both connections up, the server accepting each as it comes; then both torn down', { timeout: 30_000 }, async () => {
    const port = await freePort();
    const sp = params(d, port, false);
    const listenId = await cmListen(sp);
    assert.ok(listenId);
    const [srv, cli] = await Promise.all([cmServer(sp, listenId, 4096, 4096), cmClient(params(d, port, true), 4096, 4096)]);
    assert.ok(srv && cli);
    assert.equal(srv.ids.length, 2);
    assert.equal(srv.r.qps.length, 2);
    assert.equal(cli.r.qps.length, 2);
    // Each QP of the server is the one of its connection (made as its request came).
    srv.ids.forEach((id, i) => assert.equal(id.qp, srv.r.qps[i]));
    await Promise.all([cmDisconnect(sp, srv), cmDisconnect(sp, cli)]);
    for (const { ids, r } of [srv, cli]) {
      for (const id of ids) {
        id.destroyQp();
        await id.destroy();
      }
      releaseResources(r);
    }
  });
});
