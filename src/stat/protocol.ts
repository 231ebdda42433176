/**
 * The query a process that uses a soft device answers on its abstract Unix socket
 * `@rdmacm-stat/<pid>` (service.ts), and what `rdmacm-stat` reads (client.ts): one JSON line
 * each way, then the process closes the connection.
 *
 * Request: `{"v":1}`. Answer: a {@link StatReport}, or `{"v":1,"error":"EPERM"}` to a reader of
 * another user (root excepted). Neither side reads more than {@link MAX_REQUEST} bytes of request
 * or {@link MAX_REPORT} of answer.
 */
import type { Resources } from './resources.js';

/** The version of the query. */
export const STAT_VERSION = 1;

/** The abstract socket name prefix; the process's pid follows. */
export const STAT_NAME_PREFIX = 'rdmacm-stat/';

/** The abstract name process `pid` answers on (`\0` marks the abstract namespace). */
export function statSocketName(pid: number): string {
  return `\0${STAT_NAME_PREFIX}${pid}`;
}

/** The longest request line a process reads (bytes). */
export const MAX_REQUEST = 256;
/** The longest answer a reader takes (bytes). */
export const MAX_REPORT = 16 * 1024 * 1024;

/** One device a process opened: its counters on port 1 (absent where the device has none). */
export interface DeviceReport {
  name: string;
  provider: string;
  counters?: Record<string, number>;
}

/** What a process answers. */
export interface StatReport {
  v: number;
  pid: number;
  comm: string;
  uid: number;
  devices: DeviceReport[];
  resources: Resources;
}
