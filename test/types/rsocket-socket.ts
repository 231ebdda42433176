// RSocket as net.Socket: typed events, connect forms and options, signal, disposal.
import { Duplex } from 'node:stream';
import { connect, createConnection, RSocket, type RSocketConnectOptions, type RSocketEventMap } from 'rdmacm/rsocket';

const c: RSocket = connect(7471, '127.0.0.1', () => {});
const asDuplex: Duplex = c;
void asDuplex;

c.on('data', (d) => {
  const b: Buffer = d;
  void b;
});
// @ts-expect-error: 'data' gives a Buffer
c.on('data', (d: number) => void d);
c.on('close', (hadError) => {
  const h: boolean = hadError;
  void h;
});
// @ts-expect-error: 'close' gives hadError, a boolean
c.on('close', (hadError: string) => void hadError);
c.once('error', (e) => void e.message);
// @ts-expect-error: 'error' gives an Error
c.once('error', (e: number) => void e);
c.on('connect', () => {});
// @ts-expect-error: 'connect' has no arguments
c.on('connect', (x: number) => void x);
c.on('end', () => {});
c.on('timeout', () => {});
c.prependOnceListener('drain', () => {});
c.removeListener('data', (d: Buffer) => void d);
// an event outside the map keeps the untyped listener
c.on('custom', (x: { a: number }) => void x);
c.emit('data', Buffer.from('x'));
// @ts-expect-error: 'data' is emitted with a Buffer
c.emit('data', 1);

// connect forms as net.connect
connect(7471);
connect('7471', () => {});
createConnection({ port: 7471, host: 'localhost', family: 4, localAddress: '127.0.0.1', localPort: 0 });
const ac = new AbortController();
const o: RSocketConnectOptions = { port: 7471, signal: ac.signal };
connect(o);
new RSocket().connect(o, () => {});
// @ts-expect-error: a port is a number or a string
connect({ port: true });
// @ts-expect-error: family is 0, 4 or 6
connect({ port: 1, family: 5 });
// @ts-expect-error: signal is an AbortSignal
connect({ port: 1, signal: ac });

// disposal: using (destroy now) and await using (destroy, wait for 'close')
function syncDisposal(): void {
  using s = connect(7471);
  s.write('x');
}
async function asyncDisposal(): Promise<void> {
  await using s = connect(7471);
  s.end();
}
void syncDisposal;
void asyncDisposal;

const closeArgs: RSocketEventMap['close'] = [true];
void closeArgs;
