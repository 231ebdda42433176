// RServer as net.Server: typed events, listen forms and options, disposal.
import { createServer, RServer, RSocket, type RServerEventMap, type RServerListenOptions } from 'rdmacm/rsocket';

const server: RServer = createServer((s) => {
  // the 'connection' handler's argument is an RSocket, not any
  const r: RSocket = s;
  // @ts-expect-error: an RSocket is not a number
  const n: number = s;
  void r;
  void n;
});

server.on('connection', (s) => {
  s.write('hello');
  // @ts-expect-error: RSocket has no such method
  s.noSuchMethod();
});
// @ts-expect-error: the 'connection' listener gets an RSocket
server.on('connection', (s: number) => void s);
server.once('listening', () => {});
// @ts-expect-error: 'listening' has no arguments
server.once('listening', (x: string) => void x);
server.on('error', (e) => {
  const m: string = e.message;
  void m;
});
// @ts-expect-error: 'error' gives an Error
server.on('error', (e: string) => void e);
server.off('close', () => {});
server.prependListener('clientError', (e: Error) => void e);
server.addListener('connection', (s: RSocket) => void s);
// an event outside the map keeps EventEmitter's untyped listener
server.on('something-else', (a: number, b: string) => void [a, b]);
server.emit('connection', new RSocket());
// @ts-expect-error: 'connection' is emitted with an RSocket
server.emit('connection', 42);
// @ts-expect-error: 'listening' is emitted without arguments
server.emit('listening', 1);

// listen forms as net.Server.listen
server.listen();
server.listen(0);
server.listen(0, () => {});
server.listen(7471, '127.0.0.1');
server.listen(7471, '127.0.0.1', 16, () => {});
server.listen('7471');
const opts: RServerListenOptions = { port: 0, host: '::', backlog: 8, ipv6Only: true, signal: AbortSignal.timeout(1000) };
server.listen(opts, () => {});
// @ts-expect-error: signal is an AbortSignal
server.listen({ port: 0, signal: 'no' });
// @ts-expect-error: host is a string
server.listen({ port: 0, host: 127 });

const addr = server.address();
if (addr) {
  const p: number = addr.port;
  void p;
}
server.close((err) => void err);

async function disposal(): Promise<void> {
  const d: () => Promise<void> = server[Symbol.asyncDispose];
  void d;
  await using s = createServer();
  s.listen(0);
}
void disposal;

type ConnArgs = RServerEventMap['connection'];
const ok: ConnArgs = [new RSocket()];
void ok;
