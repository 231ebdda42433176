// RDgramSocket as dgram.Socket: 'message' (msg, rinfo), signal, disposal.
import { createSocket, RDgramSocket, type RDgramRemoteInfo, type RDgramSocketEventMap } from 'rdmacm/rsocket';

const s: RDgramSocket = createSocket('udp4', (msg, rinfo) => {
  const b: Buffer = msg;
  const r: RDgramRemoteInfo = rinfo;
  void b;
  void r;
});
s.on('message', (msg, rinfo) => {
  const port: number = rinfo.port;
  const fam: 'IPv4' | 'IPv6' = rinfo.family;
  void msg.length;
  void port;
  void fam;
});
// @ts-expect-error: 'message' gives a Buffer first
s.on('message', (msg: string) => void msg);
// @ts-expect-error: rinfo has no 'host'
s.on('message', (_msg, rinfo) => void rinfo.host);
s.once('listening', () => {});
s.on('error', (e: Error) => void e);
// @ts-expect-error: 'close' has no arguments
s.on('close', (x: number) => void x);
s.emit('message', Buffer.alloc(1), { address: '::1', family: 'IPv6', port: 1, size: 1 });
// @ts-expect-error: rinfo is required
s.emit('message', Buffer.alloc(1));

createSocket({ type: 'udp6', recvBufferSize: 1 << 16, signal: AbortSignal.timeout(10) });
// @ts-expect-error: the type is udp4 or udp6
createSocket({ type: 'tcp' });
// @ts-expect-error: signal is an AbortSignal
createSocket({ type: 'udp4', signal: true });

async function disposal(): Promise<void> {
  await using d = createSocket('udp4');
  d.bind(0);
  using e = createSocket('udp4');
  e.bind(0);
}
void disposal;

const m: RDgramSocketEventMap['message'] = [Buffer.alloc(0), { address: '127.0.0.1', family: 'IPv4', port: 9, size: 0 }];
void m;
