/**
 * rsockets as the stream tools drive them, loading no transport: the rsocket calls (`RsConn`,
 * `RsListener`), their states and option names, and the poll waiter the plain-socket path shares.
 * The `rdmacm/rsocket` entry point loads every transport; rstream and riostream load the ones a run
 * needs through `rdma.ts`, and none for plain sockets.
 */
export { RsConn, RS_EAGAIN } from '../rsocket/conn.js';
export { RsListener } from '../rsocket/listener.js';
export { rpoll, rselect, type RsPollFd } from '../rsocket/rpoll.js';
export { DsSocket, type DsDatagram } from '../rsocket/dgram/socket.js';
export { RsState } from '../rsocket/state.js';
export * from '../rsocket/options.js';
export { PollWaiters } from '../util/poll-waiters.js';
