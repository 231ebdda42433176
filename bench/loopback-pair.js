// Two connected RDMA_PS_TCP ids in this process over 127.0.0.1 (a client and the server side
// it was accepted as), each with a QP of 64 send and 64 receive WRs. `api` is the package's
// entry module (so that a bench can measure another build's dist/).
export async function loopbackPair(api) {
  const { createId, PortSpace } = api;
  const cap = { cap: { maxSendWr: 64, maxRecvWr: 64 } };
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(1);
  const reqP = listen.getRequest();
  const cli = createId(null, null, PortSpace.TCP);
  await cli.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort });
  await cli.resolveRoute();
  cli.createQp(null, cap);
  const conP = cli.connect();
  const srv = await reqP;
  srv.createQp(null, cap);
  await Promise.all([srv.accept(), conP]);
  return { listen, cli, srv };
}

// Two connected rsockets in this process over 127.0.0.1 (a client and the socket it was accepted
// as). `rs` is the rsocket module of the build under test.
export async function rsocketPair(rs) {
  const listener = new rs.RsListener();
  listener.bind({ address: '127.0.0.1', port: 0 });
  await listener.listen(1);
  const accepted = listener.accept();
  const c = new rs.RsConn();
  await c.connect({ address: '127.0.0.1', port: listener.localAddress.port });
  return { listener, c, s: await accepted };
}

/** Receives exactly `buf.length` bytes on `conn`, waiting for POLLIN whenever none are there. */
export async function rsRecvAll(rs, conn, buf) {
  let off = 0;
  while (off < buf.length) {
    const n = conn.recv(buf, off, buf.length - off);
    if (n === rs.RS_EAGAIN) await conn.poll(1);
    else if (n <= 0) throw new Error(`recv ${n}`);
    else off += n;
  }
}
