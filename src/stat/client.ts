/**
 * Reading the counters and resources of this host's processes (what `rdmacm-stat` shows): the
 * processes listening on `@rdmacm-stat/<pid>` in this network namespace (`/proc/net/unix` lists
 * every abstract name), each asked once (protocol.ts).
 *
 * Only processes of the reader's user are asked, or every one for root (a process of another user
 * refuses anyway). Abstract names have no owner, so an answer counts only from the process the
 * name promises: the listener's credentials (SO_PEERCRED) must show that pid and a user the reader
 * may read; any other is skipped, as is a process that does not answer within the timeout.
 */
import net from 'node:net';
import { readFileSync, statSync } from 'node:fs';
import { MY_UID, ROOT_UID, peerCred } from './creds.js';
import { MAX_REPORT, STAT_NAME_PREFIX, STAT_VERSION, decodeReport, statSocketName, type StatReport } from './protocol.js';

/** The pids listening on a stat name in this network namespace, ascending. */
export function statPids(): number[] {
  let text: string;
  try {
    text = readFileSync('/proc/net/unix', 'latin1');
  } catch {
    return [];
  }
  const out = new Set<number>();
  const key = `@${STAT_NAME_PREFIX}`;
  for (let at = text.indexOf(key); at >= 0; at = text.indexOf(key, at + key.length)) {
    const m = /^(\d+)/.exec(text.slice(at + key.length, at + key.length + 12));
    if (m) out.add(Number(m[1]));
  }
  return [...out].sort((a, b) => a - b);
}

/** The user ID owning process `pid`, or null when it is gone. */
function uidOfPid(pid: number): number | null {
  try {
    return statSync(`/proc/${pid}`).uid;
  } catch {
    return null;
  }
}

/** Why one process was not read (for `-d` output and tests). */
export interface SkippedProcess {
  pid: number;
  reason: 'other-user' | 'refused' | 'impostor' | 'timeout' | 'error';
}

/** Ask process `pid`; its report, or why not. */
export function readProcess(pid: number, timeoutMs: number): Promise<StatReport | SkippedProcess> {
  return new Promise((resolve) => {
    let done = false;
    const chunks: Buffer[] = [];
    let size = 0;
    const sock = net.connect({ path: statSocketName(pid) });
    const finish = (r: StatReport | SkippedProcess): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(r);
    };
    const timer = setTimeout(() => finish({ pid, reason: 'timeout' }), timeoutMs);
    sock.on('error', () => finish({ pid, reason: 'error' }));
    sock.on('connect', () => {
      const cred = peerCred(sock);
      // Without the addon the listener cannot be checked: its answer is still taken only when
      // /proc says the pid is ours, which the caller checked.
      if (cred !== null && (cred.pid !== pid || (MY_UID !== ROOT_UID && cred.uid !== MY_UID))) {
        finish({ pid, reason: 'impostor' });
        return;
      }
      sock.write(`${JSON.stringify({ v: STAT_VERSION })}\n`);
    });
    sock.on('data', (b: Buffer) => {
      size += b.length;
      if (size > MAX_REPORT) return finish({ pid, reason: 'error' });
      chunks.push(b);
    });
    sock.on('end', () => {
      const r = decodeReport(Buffer.concat(chunks), pid);
      if (r === null) return finish({ pid, reason: 'error' });
      if ('error' in r) return finish({ pid, reason: r.error === 'EPERM' ? 'refused' : 'error' });
      finish(r);
    });
  });
}

/** What {@link readProcesses} found. */
export interface ProcessScan {
  reports: StatReport[];
  skipped: SkippedProcess[];
}

/**
 * The reports of every process of this network namespace that serves one and that the caller
 * may read (see the header), in pid order; each given `timeoutMs` to answer, all at once.
 */
export async function readProcesses(timeoutMs = 1000): Promise<ProcessScan> {
  const reports: StatReport[] = [];
  const skipped: SkippedProcess[] = [];
  const asks: Promise<StatReport | SkippedProcess>[] = [];
  for (const pid of statPids()) {
    if (pid === process.pid) continue;
    const uid = uidOfPid(pid);
    if (uid === null) continue;
    if (MY_UID !== ROOT_UID && uid !== MY_UID) {
      skipped.push({ pid, reason: 'other-user' });
      continue;
    }
    asks.push(readProcess(pid, timeoutMs));
  }
  for (const r of await Promise.all(asks)) {
    if ('reason' in r) skipped.push(r);
    else reports.push(r);
  }
  return { reports, skipped };
}
