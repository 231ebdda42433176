/**
 * The query a process that uses a soft device answers on its abstract Unix socket
 * `@rdmacm-stat/<pid>` (service.ts), and what `rdmacm-stat` reads (client.ts): one JSON line
 * each way, then the process closes the connection.
 *
 * Request: `{"v":1}`. Answer: a {@link StatReport}, or `{"v":1,"error":"EPERM"}` to a reader of
 * another user (root excepted). Neither side reads more than {@link MAX_REQUEST} bytes of request
 * or {@link MAX_REPORT} of answer.
 */
import { RESOURCE_KINDS, type ResourceRecord, type Resources } from './resources.js';

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

/** The longest name, counter name or record value a reader takes (characters). */
export const MAX_FIELD = 256;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isName = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= MAX_FIELD;
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** A request line (without its newline): true for a query of this version, false for anything else. */
export function decodeRequest(line: string): boolean {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return false;
  }
  return isObject(v) && v['v'] === STAT_VERSION;
}

function recordOf(v: unknown): ResourceRecord | null {
  if (!isObject(v)) return null;
  const out: ResourceRecord = {};
  for (const [k, x] of Object.entries(v)) {
    if (!isName(k)) return null;
    if (typeof x === 'number' && Number.isFinite(x)) out[k] = x;
    else if (typeof x === 'string' && x.length <= MAX_FIELD) out[k] = x;
    else if (Array.isArray(x) && x.every(isName)) out[k] = x as string[];
    else return null;
  }
  return out;
}

/**
 * The answer of process `pid` (the bytes it sent before closing): a {@link StatReport} whose every
 * field has the type and bounds it should, or `{ error }` for a refusal (`EPERM`, `EINVAL`), or
 * null for anything else — malformed JSON, a missing or mistyped field, another pid, a record
 * value that is not a number, a string or a list of names. Records keep only those values, so a
 * reader can print any report it gets.
 */
export function decodeReport(bytes: Uint8Array, pid: number): StatReport | { error: string } | null {
  if (bytes.length > MAX_REPORT) return null;
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
  } catch {
    return null;
  }
  if (!isObject(v) || v['v'] !== STAT_VERSION) return null;
  if (v['error'] !== undefined) return isName(v['error']) ? { error: v['error'] } : null;
  if (v['pid'] !== pid || typeof v['comm'] !== 'string' || v['comm'].length > MAX_FIELD || !isCount(v['uid'])) return null;
  const devs = v['devices'];
  if (!Array.isArray(devs)) return null;
  const devices: DeviceReport[] = [];
  for (const d of devs) {
    if (!isObject(d) || !isName(d['name']) || !isName(d['provider'])) return null;
    const dev: DeviceReport = { name: d['name'], provider: d['provider'] };
    const c = d['counters'];
    if (c !== undefined) {
      if (!isObject(c)) return null;
      const counters: Record<string, number> = {};
      for (const [k, x] of Object.entries(c)) {
        if (!isName(k) || !isCount(x)) return null;
        counters[k] = x;
      }
      dev.counters = counters;
    }
    devices.push(dev);
  }
  const res = v['resources'];
  if (!isObject(res)) return null;
  const resources = {} as Resources;
  for (const kind of RESOURCE_KINDS) {
    const list = res[kind];
    if (!Array.isArray(list)) return null;
    const recs: ResourceRecord[] = [];
    for (const x of list) {
      const r = recordOf(x);
      if (r === null) return null;
      recs.push(r);
    }
    resources[kind] = recs;
  }
  return { v: STAT_VERSION, pid, comm: v['comm'], uid: v['uid'], devices, resources };
}
