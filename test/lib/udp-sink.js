// A plain UDP socket bound to argv[2]:argv[3] that prints each datagram it receives as one line:
// the first 16 bytes in hex, grouped as a ds_udp_header (tag, version, op, length, reserved, QPN,
// IPv4 address), then the first payload byte. For tests of what a datagram rsocket sends to a peer
// that is not an rsocket.
import { createSocket } from 'node:dgram';

const [address, port] = process.argv.slice(2);
const s = createSocket('udp4');
s.on('message', (m) => {
  const h = m.toString('hex');
  process.stdout.write(`${h.slice(0, 8)} ${h.slice(8, 10)} ${h.slice(10, 12)} ${h.slice(12, 14)} ${h.slice(14, 16)} ${h.slice(16, 24)} ${h.slice(24, 32)} ${h.slice(32, 34)}\n`);
});
s.bind(Number(port), address);
process.on('SIGTERM', () => s.close(() => process.exit(0)));
