// The counter and resource listing's query (src/stat/protocol.ts): the request line a process
// reads from a local reader, and the report rdmacm-stat reads from each process.
//
// Invariants: a valid report decodes to itself; any bytes — mutated reports, mutated requests,
// random JSON values in any field — decode to null, a refusal `{ error }` with a short name, or a
// report of the right shape (every counter a finite number, every record value a number, a string
// of bounded length or a list of names, every resource kind a list, the asked pid), never a throw;
// a request is accepted exactly when it is a JSON object whose `v` is the version.
import assert from 'node:assert/strict';
import { decodeReport, decodeRequest, MAX_FIELD, STAT_VERSION } from '../../../dist/stat/protocol.js';
import { mutate, hexHead } from '../lib/mutate.js';

const KINDS = ['qp', 'cm_id', 'mr', 'cq', 'pd'];

function genName(rng) {
  const abc = 'abcdefghijklmnopqrstuvwxyz_-/0123456789';
  let s = '';
  for (let i = 0, n = 1 + rng.int(12); i < n; i++) s += abc[rng.int(abc.length)];
  return s;
}

function genRecord(rng) {
  const r = {};
  for (let i = 0, n = rng.int(8); i < n; i++) {
    const k = genName(rng);
    const w = rng.int(3);
    r[k] = w === 0 ? rng.int(1 << 30) : w === 1 ? genName(rng) : [genName(rng), genName(rng)];
  }
  return r;
}

function genReport(rng, pid) {
  const devices = [];
  for (let i = 0, n = rng.int(3); i < n; i++) {
    const d = { name: genName(rng), provider: rng.pick(['siw', 'rxe']) };
    if (rng.chance(0.8)) {
      d.counters = {};
      for (let j = 0, m = rng.int(10); j < m; j++) d.counters[genName(rng)] = rng.int(1 << 30);
    }
    devices.push(d);
  }
  const resources = {};
  for (const k of KINDS) resources[k] = Array.from({ length: rng.int(4) }, () => genRecord(rng));
  return { v: STAT_VERSION, pid, comm: genName(rng), uid: rng.int(65536), devices, resources };
}

/** A random JSON value, for replacing one field. */
function genValue(rng, depth = 0) {
  switch (rng.int(depth > 2 ? 5 : 7)) {
    case 0: return null;
    case 1: return rng.chance(0.5);
    case 2: return rng.pick([0, -1, 1.5, 1e308, 2 ** 53, NaN]);
    case 3: return 'x'.repeat(rng.pick([0, 1, MAX_FIELD, MAX_FIELD + 1]));
    case 4: return genName(rng);
    case 5: return Array.from({ length: rng.int(3) }, () => genValue(rng, depth + 1));
    default: return Object.fromEntries(Array.from({ length: rng.int(3) }, () => [genName(rng), genValue(rng, depth + 1)]));
  }
}

/** Replace one field somewhere in `o` by a random value. */
function poke(rng, o) {
  let at = o;
  for (let i = 0; i < 4; i++) {
    const keys = Object.keys(at);
    if (keys.length === 0) break;
    const k = rng.pick(keys);
    if (i < 3 && typeof at[k] === 'object' && at[k] !== null && rng.chance(0.6)) {
      at = at[k];
      continue;
    }
    at[k] = genValue(rng);
    return `${k}=${JSON.stringify(at[k])?.slice(0, 40)}`;
  }
  return 'none';
}

function checkShape(r, pid) {
  if (r === null) return 'null';
  if ('error' in r) {
    assert.ok(typeof r.error === 'string' && r.error.length > 0 && r.error.length <= MAX_FIELD);
    return 'refusal';
  }
  assert.equal(r.pid, pid);
  assert.equal(typeof r.comm, 'string');
  assert.ok(Number.isFinite(r.uid));
  for (const d of r.devices) {
    assert.ok(typeof d.name === 'string' && typeof d.provider === 'string');
    if (d.counters !== undefined) for (const v of Object.values(d.counters)) assert.ok(Number.isFinite(v));
  }
  for (const k of KINDS) {
    assert.ok(Array.isArray(r.resources[k]));
    for (const rec of r.resources[k]) {
      for (const v of Object.values(rec)) {
        assert.ok((typeof v === 'number' && Number.isFinite(v)) || (typeof v === 'string' && v.length <= MAX_FIELD) || (Array.isArray(v) && v.every((x) => typeof x === 'string')), JSON.stringify(v));
      }
    }
  }
  return 'report';
}

export default {
  name: 'stat-report',
  about: 'rdmacm-stat\'s query: the request line a process reads, the report a reader decodes',
  budgetMs: 500,
  run(rng, t) {
    const pid = 1 + rng.int(1 << 22);
    const rep = genReport(rng, pid);
    const text = JSON.stringify(rep);
    assert.deepEqual(decodeReport(Buffer.from(text), pid), rep, 'a valid report decodes to itself');
    let bytes;
    let what;
    const w = rng.int(3);
    if (w === 0) {
      const m = mutate(rng, Buffer.from(text));
      bytes = m.bytes;
      what = m.ops.join(' ');
    } else if (w === 1) {
      const o = JSON.parse(text);
      what = poke(rng, o);
      bytes = Buffer.from(JSON.stringify(o));
    } else {
      const o = JSON.parse(text);
      what = 'other pid';
      bytes = Buffer.from(JSON.stringify(o));
      t.note(what);
      assert.equal(decodeReport(bytes, pid + 1), null, 'a report of another pid is refused');
      t.count('other-pid');
      return;
    }
    t.note(`${what}: ${hexHead(bytes)}`);
    t.count(checkShape(decodeReport(bytes, pid), pid));
    // The request line: the version query, mutated.
    const req = mutate(rng, Buffer.from(`{"v":${STAT_VERSION}}`));
    const line = Buffer.from(req.bytes).toString('utf8');
    let ref = false;
    try {
      const v = JSON.parse(line);
      ref = typeof v === 'object' && v !== null && !Array.isArray(v) && v.v === STAT_VERSION;
    } catch {
      ref = false;
    }
    assert.equal(decodeRequest(line), ref, `request ${JSON.stringify(line)}`);
  },
  check(counts, cases) {
    if (cases < 2000) return;
    assert.ok(counts.null > 0 && counts.report > 0, JSON.stringify(counts));
  },
};
