#!/usr/bin/env node
/**
 * rdmacm-stat: the counters and resources of this host's soft RDMA devices, per process and per
 * device, shaped like iproute2's `rdma statistic show` and `rdma resource show` (rdma/stat.c,
 * rdma/res.c: the same objects, record layout and `-j` JSON keys). Each process that uses a soft
 * device answers on `@rdmacm-stat/<pid>` (docs/counters.md); only the caller's own processes are
 * read (every process for root), and one that does not answer within a second is skipped.
 *
 *   rdmacm-stat [-j] [-p] [-d] statistic [show [link DEV[/PORT]] [pid PID]]
 *   rdmacm-stat [-j] [-p] [-d] resource [show [qp|cm_id|mr|cq|pd] [link DEV[/PORT] | dev DEV] [pid PID]]
 *
 * Exit status 0, or 1 for a usage error. docs/man/rdmacm-stat.1.md.
 */
import './startup.js';
import { readProcesses, RESOURCE_KINDS, type ResourceKind, type ResourceRecord, type StatReport } from '../index.js';
import { errOut, out, runMain } from './c-compat.js';

const PROG = 'rdmacm-stat';
/** How long each process has to answer (ms). */
const ANSWER_MS = 1000;

const USAGE = `Usage: ${PROG} [ OPTIONS ] OBJECT { COMMAND | help }
where  OBJECT := { statistic | resource | help }
       OPTIONS := { -j[son] | -p[retty] | -d[etails] }
       ${PROG} statistic show [ link DEV[/PORT] ] [ pid PID ]
       ${PROG} resource show [ qp | cm_id | mr | cq | pd ] [ link DEV[/PORT] | dev DEV ] [ pid PID ]
`;

interface Options {
  json: boolean;
  pretty: boolean;
  details: boolean;
}

/** `link DEV[/PORT]`, `dev DEV`, `pid PID` filters. */
interface Filter {
  dev?: string;
  port?: number;
  pid?: number;
}

class UsageError extends Error {}

function parseFilter(args: string[]): Filter {
  const f: Filter = {};
  for (let i = 0; i < args.length; i += 2) {
    const key = args[i] as string;
    const val = args[i + 1];
    if (val === undefined) throw new UsageError(`Command line is not complete after "${key}".`);
    if (key === 'link' || key === 'dev') {
      const [d = '', p] = val.split('/');
      f.dev = d;
      if (p !== undefined) {
        if (key === 'dev' || !/^\d+$/.test(p)) throw new UsageError(`Wrong port value "${val}".`);
        f.port = Number(p);
      }
    } else if (key === 'pid') {
      if (!/^\d+$/.test(val)) throw new UsageError(`Wrong pid value "${val}".`);
      f.pid = Number(val);
    } else throw new UsageError(`Unknown parameter '${key}'.`);
  }
  return f;
}

function matches(f: Filter, r: ResourceRecord | { ifname?: string; port?: number; pid: number }): boolean {
  if (f.dev !== undefined && r['ifname' as keyof typeof r] !== f.dev) return false;
  const port = r['port' as keyof typeof r];
  if (f.port !== undefined && port !== undefined && port !== f.port) return false;
  if (f.pid !== undefined && r['pid' as keyof typeof r] !== f.pid) return false;
  return true;
}

function value(v: string | number | string[]): string {
  return Array.isArray(v) ? v.join(',') : String(v);
}

function printJson(o: Options, v: unknown): void {
  out(`${o.pretty ? JSON.stringify(v, null, 2) : JSON.stringify(v)}\n`);
}

/** The fields holding a memory key. */
const KEY_FIELDS = new Set(['rkey', 'lkey']);

/** One text record: `link DEV/PORT` or `dev DEV`, then every other field as `key value`. */
function textLine(r: ResourceRecord, byLink: boolean): string {
  const parts: string[] = [];
  if (r['ifname'] !== undefined) parts.push(byLink ? `link ${value(r['ifname'])}/${value(r['port'] ?? 1)}` : `dev ${value(r['ifname'])}`);
  // memory keys: hex digits in JSON, `0x…` in text (iproute2 rdma/res.c print_key)
  for (const [k, v] of Object.entries(r)) if (k !== 'ifname' && k !== 'port') parts.push(`${k} ${KEY_FIELDS.has(k) ? `0x${value(v)}` : value(v)}`);
  return parts.join(' ');
}

function statistic(o: Options, f: Filter, reports: StatReport[]): void {
  const rows: ResourceRecord[] = [];
  for (const r of reports) {
    for (const d of r.devices) {
      if (d.counters === undefined) continue;
      const row: ResourceRecord = { ifname: d.name, port: 1, pid: r.pid, comm: r.comm, ...d.counters };
      if (matches(f, row as ResourceRecord & { pid: number })) rows.push(row);
    }
  }
  if (o.json) return printJson(o, rows);
  for (const row of rows) out(`${textLine(row, true)}\n`);
}

/** `rdma resource show`: per device, how many objects of each kind (rdma/res.c res_print_summary). */
function summary(o: Options, f: Filter, reports: StatReport[]): void {
  const byDev = new Map<string, Record<string, number>>();
  const kinds: ResourceKind[] = ['pd', 'cq', 'qp', 'cm_id', 'mr'];
  for (const r of reports) {
    for (const d of r.devices) if (!byDev.has(d.name)) byDev.set(d.name, Object.fromEntries(kinds.map((k) => [k, 0])));
    for (const k of kinds) {
      for (const rec of r.resources[k] ?? []) {
        const dev = rec['ifname'];
        if (typeof dev !== 'string' || !matches(f, rec)) continue;
        const c = byDev.get(dev) ?? Object.fromEntries(kinds.map((x) => [x, 0]));
        c[k] = (c[k] ?? 0) + 1;
        byDev.set(dev, c);
      }
    }
  }
  const devs = [...byDev.keys()].filter((d) => f.dev === undefined || d === f.dev).sort();
  if (o.json) return printJson(o, devs.map((d, i) => ({ ifindex: i, ifname: d, summary: byDev.get(d) })));
  devs.forEach((d, i) => {
    const c = byDev.get(d) as Record<string, number>;
    out(`${i}: ${d}: ${kinds.map((k) => `${k} ${c[k] ?? 0}`).join(' ')}\n`);
  });
}

function resource(o: Options, kind: ResourceKind, f: Filter, reports: StatReport[]): void {
  const rows: ResourceRecord[] = [];
  for (const r of reports) for (const rec of r.resources[kind] ?? []) if (matches(f, rec)) rows.push(rec);
  if (o.json) return printJson(o, rows);
  const byLink = kind === 'qp' || kind === 'cm_id';
  for (const row of rows) out(`${textLine(row, byLink)}\n`);
}

/** `show` is the default command; `list` its synonym, as in rdma. */
function command(args: string[]): string[] {
  const c = args[0];
  if (c === undefined) return [];
  if (c === 'show' || c === 'list') return args.slice(1);
  // `rdma statistic link rxe0/1` and `rdma resource qp` are accepted too
  return args;
}

runMain(PROG, async (argv) => {
  const o: Options = { json: false, pretty: false, details: false };
  let i = 0;
  for (; i < argv.length && (argv[i] as string).startsWith('-'); i++) {
    const a = argv[i] as string;
    if (a === '-j' || a === '-json' || a === '--json') o.json = true;
    else if (a === '-p' || a === '-pretty' || a === '--pretty') o.pretty = true;
    else if (a === '-d' || a === '-details' || a === '--details') o.details = true;
    else if (a === '-h' || a === '-help' || a === '--help') {
      out(USAGE);
      return 0;
    } else {
      errOut(`Option "${a}" is unknown, try "${PROG} help".\n`);
      return 1;
    }
  }
  const object = argv[i];
  const rest = argv.slice(i + 1);
  if (object === undefined || object === 'help') {
    (object === undefined ? errOut : out)(USAGE);
    return object === undefined ? 1 : 0;
  }
  try {
    let run: (reports: StatReport[]) => void;
    if ('statistic'.startsWith(object) && object.length >= 2) {
      const args = command(rest);
      if (args[0] === 'help') {
        out(USAGE);
        return 0;
      }
      const f = parseFilter(args);
      run = (reports) => statistic(o, f, reports);
    } else if ('resource'.startsWith(object) && object.length >= 1) {
      const args = command(rest);
      if (args[0] === 'help') {
        out(USAGE);
        return 0;
      }
      const kind = args[0];
      if (kind !== undefined && (RESOURCE_KINDS as readonly string[]).includes(kind)) {
        const f = parseFilter(args.slice(1));
        run = (reports) => resource(o, kind as ResourceKind, f, reports);
      } else {
        const f = parseFilter(args);
        run = (reports) => summary(o, f, reports);
      }
    } else {
      errOut(`Object "${object}" is unknown, try "${PROG} help".\n`);
      return 1;
    }
    const scan = await readProcesses(ANSWER_MS);
    if (o.details) for (const s of scan.skipped) errOut(`pid ${s.pid} skipped: ${s.reason}\n`);
    run(scan.reports);
    return 0;
  } catch (e) {
    if (e instanceof UsageError) {
      errOut(`${e.message}\n`);
      return 1;
    }
    throw e;
  }
});
