// What the scripts the native interop tests run (native-stat.mjs, native-verbs.mjs, srq-peer.mjs,
// mw-peer.mjs, uc-cm.mjs; in the reference VM and on the host) share: polling a CQ with a deadline,
// and a call's outcome as data.

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Poll `cq` until `n` completions arrived or `Date.now()` passes `until`: copies of them, oldest first. */
export async function pollUntil(cq, n, until) {
  const out = [];
  while (out.length < n && Date.now() < until) {
    const got = cq.poll(Math.min(16, n - out.length));
    if (got.length) out.push(...got.map((w) => ({ ...w })));
    else await sleep(2);
  }
  return out;
}

/** `f()`'s outcome: `{ code: 'ok', v }` with what it returned, or `{ code }` of what it threw. */
export function codeOf(f) {
  try {
    return { code: 'ok', v: f() };
  } catch (e) {
    return { code: e.code ?? String(e) };
  }
}
