// A process with one batched UDP endpoint that sends 10 datagrams to 127.0.0.1:<port> and then
// (mode) closes it and returns, calls process.exit(0) at once, or leaves it open but unreferenced
// and returns. In every mode the process must end by itself with the datagrams sent (udp-io.test.js).
import { MmsgEndpoint } from '../../../../dist/transport/roce/udp-mmsg.js';

const [mode, port] = [process.argv[2], Number(process.argv[3])];
const ep = MmsgEndpoint.open({ family: 4, bindIp: '127.0.0.1', port: 0, bufSize: 1 << 20, onDatagram: () => {}, onError: (e) => console.error(e) }, true);
ep.ref(mode !== 'unref');
for (let i = 0; i < 10; i++) ep.send(Buffer.alloc(100, i), 100, '127.0.0.1', port);
if (mode === 'close') ep.close();
else if (mode === 'exit') process.exit(0);
