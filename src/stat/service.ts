/**
 * The per-process endpoint of the counter and resource listing: once this process opens a device
 * (a soft one or a kernel device through the native backend), it listens on the abstract Unix socket `@rdmacm-stat/<pid>` and answers each
 * connection of its own user (or root) with its devices' counters and its resources, as one JSON
 * line (protocol.ts), then closes it. A reader of another user gets `EPERM` and nothing else.
 *
 * The socket never keeps the process alive (it and every connection are unref'd) and costs
 * nothing until read: no timer, no work per verb. `RDMACM_STAT=0` turns it off. A name already
 * taken (another process squatting it) leaves this process unlisted; nothing else changes.
 */
import net from 'node:net';
import { _setContextOpenHook, _openContexts } from '../verbs/device.js';
import { listResources, processOwner } from './resources.js';
import { mayRead, peerCred, MY_UID } from './creds.js';
import { MAX_REQUEST, STAT_VERSION, decodeRequest, statSocketName, type DeviceReport, type StatReport } from './protocol.js';

/** How long a connection may take to send its request (ms). */
const REQUEST_TIMEOUT_MS = 2000;

let server: net.Server | null = null;

/** Whether `RDMACM_STAT` leaves the endpoint on (anything but `0`, `off`, `no`, `false`). */
function enabled(): boolean {
  const v = (process.env['RDMACM_STAT'] ?? '').trim().toLowerCase();
  return !['0', 'off', 'no', 'false'].includes(v);
}

/** This process's report: every opened device's counters and every resource. */
export function statReport(): StatReport {
  const devices: DeviceReport[] = [];
  for (const ctx of _openContexts()) {
    const d: DeviceReport = { name: ctx.device.name, provider: ctx.device.provider };
    try {
      d.counters = ctx.queryCounters(1);
    } catch {
      // a device without counters, a removed one: listed without
    }
    devices.push(d);
  }
  const who = processOwner();
  return { v: STAT_VERSION, pid: who.pid, comm: who.comm, uid: MY_UID, devices, resources: listResources() };
}

function serve(sock: net.Socket): void {
  sock.unref();
  sock.setTimeout(REQUEST_TIMEOUT_MS, () => sock.destroy());
  sock.on('error', () => sock.destroy());
  const cred = peerCred(sock);
  if (cred === null || !mayRead(cred.uid)) {
    sock.end(`${JSON.stringify({ v: STAT_VERSION, error: 'EPERM' })}\n`);
    return;
  }
  let got = '';
  sock.setEncoding('utf8');
  sock.on('data', (chunk: string) => {
    got += chunk;
    if (got.length > MAX_REQUEST) {
      sock.destroy();
      return;
    }
    if (!got.includes('\n')) return;
    sock.removeAllListeners('data');
    if (!decodeRequest(got.slice(0, got.indexOf('\n')))) {
      sock.end(`${JSON.stringify({ v: STAT_VERSION, error: 'EINVAL' })}\n`);
      return;
    }
    sock.end(`${JSON.stringify(statReport())}\n`);
  });
}

/** Start answering, once, when a context of any device is first opened. */
function contextOpened(): void {
  if (server !== null) return;
  if (!enabled() || process.platform !== 'linux') return;
  const s = net.createServer(serve);
  server = s;
  s.on('error', () => s.close());
  s.listen({ path: statSocketName(process.pid) });
  s.unref();
}

_setContextOpenHook(contextOpened);

/** Whether this process's endpoint is listening (for tests). */
export function statServiceListening(): boolean {
  return server?.listening === true;
}
