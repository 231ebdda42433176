/**
 * rsockets: librdmacm's socket protocol over RDMA (wire-compatible with `rsocket.c`), over any
 * device that serves RC connections (the soft iWARP and RoCEv2 devices, kernel devices through the
 * native backend).
 *
 * Node face: {@link RSocket} (a `stream.Duplex` like `net.Socket`), {@link createServer} /
 * {@link connect} like `node:net`. rsocket face: {@link RsConn} / {@link RsListener} with
 * non-blocking `send`/`recv`/`poll`, `writev`/`readv`/`sendmsg`/`recvmsg`, `shutdown`,
 * `setsockopt`, `riomap`/`riowrite`, and {@link rpoll} / {@link rselect} over several sockets.
 *
 * ```ts
 * import { createServer, connect } from 'rdmacm/rsocket';
 * createServer((s) => s.pipe(s)).listen(7471);
 * const c = connect(7471, '127.0.0.1', () => c.end('hello'));
 * c.on('data', (d) => console.log(d.toString()));
 * ```
 * @packageDocumentation
 */
// Symbol.dispose / Symbol.asyncDispose before any class that defines disposers (Node < 20.4 lacks them).
import '../util/dispose.js';
import '../transport-settings.js';
export { RSocket, connect, createConnection, configFrom, type RSocketOptions, type RSocketConnectOptions, type RSocketEventMap } from './socket.js';
export { RServer, createServer, type RServerListenOptions, type RServerEventMap } from './server.js';
export { RsConn, RS_EAGAIN } from './conn.js';
export type { SockOptValue } from './sockopt.js';
export { defaultConfig, type RsConfig } from './tunables.js';
export { RsListener } from './listener.js';
export { rpoll, rselect, type RsPollFd, type RsPollable, type RsFdSet, type RsTimeval } from './rpoll.js';
export type { RsMsghdr } from './vec.js';
export { DsSocket, type DsDatagram } from './dgram/socket.js';
export { RDgramSocket, createSocket, type RDgramRemoteInfo, type RDgramSocketOptions, type RDgramSocketEventMap } from './dgram/node-socket.js';
export type { EventListener, EventArgs } from './events.js';
export { RsState, describeState } from './state.js';
export * from './options.js';
/** The rsocket wire protocol: immediate-data codes, the connection data and control messages (pure codecs). */
export * as protocol from './protocol.js';
