// A process with one batched UDP endpoint that sends 10 datagrams to 127.0.0.1:<port> and then
// (mode) closes it and returns, calls process.exit(0) at once, or leaves it open but unreferenced
// and returns; or (`worker`) does so in a worker thread that ends with one endpoint still open and
// one just closed. In every mode the process must end by itself, with the datagrams sent
// (udp-io.test.js).
import { Worker, isMainThread, workerData } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { MmsgEndpoint } from '../../../../dist/transport/roce/udp-mmsg.js';

const [mode, port] = isMainThread ? [process.argv[2], Number(process.argv[3])] : [workerData.mode, workerData.port];
if (mode === 'worker') {
  new Worker(fileURLToPath(import.meta.url), { workerData: { mode: 'in-worker', port } }).on('error', (e) => {
    console.error(e);
    process.exitCode = 1;
  });
}
const ep = MmsgEndpoint.open({ family: 4, bindIp: '127.0.0.1', port: 0, bufSize: 1 << 20, onDatagram: () => {}, onError: (e) => console.error(e) }, true);
ep.ref(mode !== 'unref');
if (mode !== 'worker') for (let i = 0; i < 10; i++) ep.send(Buffer.alloc(100, i), 100, '127.0.0.1', port);
if (mode === 'close' || mode === 'worker') ep.close();
else if (mode === 'exit') process.exit(0);
else if (mode === 'in-worker') {
  const other = MmsgEndpoint.open({ family: 4, bindIp: '127.0.0.1', port: 0, bufSize: 1 << 20, onDatagram: () => {}, onError: (e) => console.error(e) }, true);
  other.close();
  setTimeout(() => process.exit(0), 20); // ends the worker with `ep` open and `other`'s close pending or done
}
