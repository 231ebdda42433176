// What rdma-core's rping prints with -v, generated from its buffer pattern (rping.c,
// rping_test_client): the buffer of ping N is snprintf("rdma-ping-%d: ", N) followed by
// letters from 'A' + N mod 58, incrementing and wrapping after 'z' (122) back to 'A' (65),
// up to the end of the buffer, whose last byte is set to NUL. So the printed text is size-1
// bytes. The client prints "ping data: <text>", the server "server ping data: <text>".
// Checked against the kernel's rping in the reference VM by plumbing.test.js.
import assert from 'node:assert/strict';

export const RPING_DEFAULT_SIZE = 64;
export const RPING_DEFAULT_PORT = 7174;

export function rpingText(n, size = RPING_DEFAULT_SIZE) {
  const buf = Buffer.alloc(size);
  const head = Buffer.from(`rdma-ping-${n}: `, 'latin1');
  const cc = Math.min(head.length, size - 1);      // snprintf(buf, size, ...) writes at most size-1
  head.copy(buf, 0, 0, cc);
  let c = 65 + (n % 58);
  for (let i = cc; i < size; i++) {
    buf[i] = c;
    c += 1;
    if (c > 122) c = 65;
  }
  buf[size - 1] = 0;
  return buf.subarray(0, size - 1).toString('latin1');
}

/** The stdout of `rping -v` for `count` pings: lines with a trailing newline each. */
export function rpingStdout({ count, size = RPING_DEFAULT_SIZE, role = 'client' }) {
  const prefix = role === 'server' ? 'server ping data: ' : 'ping data: ';
  let s = '';
  for (let n = 0; n < count; n++) s += `${prefix}${rpingText(n, size)}\n`;
  return s;
}

const clip = (s, n = 90) => (s.length > n ? `${s.slice(0, n)}…(${s.length} bytes)` : s);

/** Compare rping stdout with the expectation, reporting the first differing line briefly (lines can be 64 KiB). */
export function assertRpingStdout(actual, expected, what) {
  if (actual === expected) return;
  const a = actual.split('\n'), e = expected.split('\n');
  for (let i = 0; i < Math.max(a.length, e.length); i++) {
    if (a[i] === e[i]) continue;
    const x = a[i] ?? '<missing>', y = e[i] ?? '<missing>';
    let at = 0;
    while (at < x.length && x[at] === y[at]) at++;
    assert.fail(`${what}: stdout line ${i + 1} of ${e.length - 1} expected differs at byte ${at}\n` +
      `  got:      ${JSON.stringify(clip(x.slice(Math.max(0, at - 20)), 120))}\n` +
      `  expected: ${JSON.stringify(clip(y.slice(Math.max(0, at - 20)), 120))}\n` +
      `  (got ${a.length - 1} lines / ${actual.length} bytes, expected ${e.length - 1} lines / ${expected.length} bytes)`);
  }
}

// rping's exit status is weak evidence: rping_test_client/server end with
// `return (cb->state == DISCONNECTED) ? 0 : ret;`, so a run cut short by a disconnect still
// exits 0 (seen: a client stuck on "wait for RDMA_WRITE_ADV state 10" exited 0 once its peer
// died). What the kernel's rping prints on stderr in a clean run, per role; any other line
// means the run did not go as it should.
// The last line of either role can also be its cm_thread's `perror("rdma_get_cm_event")` with
// EBADF: after the DISCONNECT, rping's main thread destroys the event channel while that thread
// may still be waiting on it (rping.c main: rping_run_server or rping_run_client, then
// rdma_destroy_event_channel without joining cm_thread), a race inside rping's own teardown once
// the run is over.
const CLEAN_STDERR = {
  client: ['client DISCONNECT EVENT...', 'rdma_get_cm_event: Bad file descriptor'],
  server: ['server DISCONNECT EVENT...', 'wait for RDMA_READ_ADV state 10', 'rdma_get_cm_event: Bad file descriptor'],
};
/** Lines of a kernel rping's stderr that a clean run does not print. */
export function unexpectedStderr(stderr, role) {
  return stderr.split('\n').filter((l) => l.trim() && !CLEAN_STDERR[role].includes(l));
}
