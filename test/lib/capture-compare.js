// Field-by-field comparison of two RoCEv2 captures of the same exchange (ours and the kernel rxe's),
// decoded by Wireshark's tshark. Every field listed in FIELDS is compared packet by packet under
// one rule: `same` (equal text), `role` (values that name a QP, a connection, a buffer, a host ...:
// each capture's values are replaced by their order of first appearance in one name space, so the
// same structure must show, not the same numbers), `psn` (relative to the first PSN each sender
// used towards that QP), or `skip` with the reason the field legitimately differs (the test
// checks those fields on their own terms). The ICRC of every packet is recomputed from the
// captured IP/UDP header (Wireshark 4.0 does not check it).
import { spawnSync } from 'node:child_process';
import { roce } from '../../dist/wire/index.js';

/**
 * [tshark field, rule, name space (role) or reason (skip), owner (role: 'src' or 'dst' when the
 * value is one host's own number, as a QPN: each host numbers its QPs, and two hosts may well
 * both have a QP 0x15)]. The IP/UDP header, BTH, DETH, RETH,
 * AETH, immediate data, the MAD header and the IB CM attributes tshark 4.0 decodes (REQ, REP, RTU,
 * DREQ; it has no SIDR and no DREP fields).
 */
export const FIELDS = [
  ['ip.version', 'same'],
  ['ip.hdr_len', 'same'],
  ['ip.dsfield.dscp', 'same'],
  ['ip.dsfield.ecn', 'same'],
  ['ip.len', 'same'],
  ['ip.flags.rb', 'same'],
  ['ip.flags.df', 'same'],
  ['ip.flags.mf', 'same'],
  ['ip.frag_offset', 'same'],
  ['ip.ttl', 'same'],
  ['ip.proto', 'same'],
  ['ip.id', 'skip', 'rxe: __ip_select_ident(), a hashed per-destination counter; ours: 0 (IP_PMTUDISC_PROBE), the ID the ICRC is computed with; the ICRC check below covers it'],
  ['ip.checksum', 'skip', 'covers the ID and the addresses'],
  ['ip.src', 'role', 'host'],
  ['ip.dst', 'role', 'host'],
  ['udp.srcport', 'skip', 'rxe: a port per QP (hash of the QPN, or of the rdma_cm flow label); ours: the device\'s one UDP socket (receivers ignore it); checked on its own'],
  ['udp.dstport', 'same'],
  ['udp.length', 'same'],
  ['udp.checksum', 'same'],
  ['infiniband.bth.opcode', 'same'],
  ['infiniband.bth.se', 'same'],
  ['infiniband.bth.m', 'same'],
  ['infiniband.bth.padcnt', 'same'],
  ['infiniband.bth.tver', 'same'],
  ['infiniband.bth.p_key', 'same'],
  ['infiniband.bth.destqp', 'role', 'qpn', 'dst'],
  ['infiniband.bth.a', 'same'],
  ['infiniband.bth.reserved7', 'same'],
  ['infiniband.bth.psn', 'psn'],
  ['infiniband.deth.q_key', 'same'],
  ['infiniband.deth.srcqp', 'role', 'qpn', 'src'],
  ['infiniband.reth.va', 'role', 'va', 'dst'],
  ['infiniband.reth.r_key', 'role', 'rkey', 'dst'],
  ['infiniband.reth.dmalen', 'same'],
  ['infiniband.aeth.syndrome.opcode', 'same'],
  ['infiniband.aeth.syndrome.credit_count', 'skip', 'rxe always sends 31 ("credits unknown"); ours advertises the receive WQEs posted (IBTA 9.7.7.2.6); checked on its own'],
  ['infiniband.aeth.syndrome.timer', 'same'],
  ['infiniband.aeth.syndrome.error_code', 'same'],
  ['infiniband.aeth.msn', 'same'],
  ['infiniband.immdt', 'role', 'qpn', 'src'],
  ['infiniband.mad.baseversion', 'same'],
  ['infiniband.mad.mgmtclass', 'same'],
  ['infiniband.mad.classversion', 'same'],
  ['infiniband.mad.method', 'same'],
  ['infiniband.mad.status', 'same'],
  ['infiniband.mad.classspecific', 'same'],
  ['infiniband.mad.transactionid', 'role', 'tid'],
  ['infiniband.mad.attributeid', 'same'],
  ['infiniband.mad.attributemodifier', 'same'],
  ['infiniband.cm.req.serviceid', 'same'],
  ['infiniband.cm.req.localcaguid', 'role', 'guid'],
  ['infiniband.cm.req.localqkey', 'same'],
  ['infiniband.cm.req.localqpn', 'role', 'qpn', 'src'],
  ['infiniband.cm.req.responderres', 'same'],
  ['infiniband.cm.req.localeecn', 'same'],
  ['infiniband.cm.req.initdepth', 'same'],
  ['infiniband.cm.req.remoteeecn', 'same'],
  ['infiniband.cm.req.remoteresptout', 'same'],
  ['infiniband.cm.req.transpsvctype', 'same'],
  ['infiniband.cm.req.e2eflowctrl', 'same'],
  ['infiniband.cm.req.startpsn', 'role', 'psn0'],
  ['infiniband.cm.req.localresptout', 'same'],
  ['infiniband.cm.req.retrcount', 'same'],
  ['infiniband.cm.req.pkey', 'same'],
  ['infiniband.cm.req.pppmtu', 'same'],
  ['infiniband.cm.req.rdcexist', 'same'],
  ['infiniband.cm.req.rnrretrcount', 'same'],
  ['infiniband.cm.req.maxcmretr', 'same'],
  ['infiniband.cm.req.srq', 'same'],
  ['infiniband.cm.req.ext_transport', 'same'],
  ['infiniband.cm.req.prim_locallid', 'same'],
  ['infiniband.cm.req.prim_remotelid', 'same'],
  ['infiniband.cm.req.prim_localgid_ipv4', 'role', 'host'],
  ['infiniband.cm.req.prim_remotegid_ipv4', 'role', 'host'],
  ['infiniband.cm.req.prim_flowlabel', 'skip', 'cma\'s hash of the rdma_cm ports (the client\'s is random); checked on its own'],
  ['infiniband.cm.req.prim_pktrate', 'skip', 'tshark 4.0 reads the flow label and the packet rate from the wrong bits (flow label 0x9fe65 shown as 0x9fe); checked with our decoder'],
  ['infiniband.cm.req.prim_tfcclass', 'same'],
  ['infiniband.cm.req.prim_hoplim', 'same'],
  ['infiniband.cm.req.prim_sl', 'same'],
  ['infiniband.cm.req.prim_subnetlocal', 'same'],
  ['infiniband.cm.req.prim_localacktout', 'same'],
  ['infiniband.cm.req.alt_locallid', 'same'],
  ['infiniband.cm.req.alt_remotelid', 'same'],
  ['infiniband.cm.req.alt_flowlabel', 'same'],
  ['infiniband.cm.req.alt_hoplim', 'same'],
  ['infiniband.cm.req.alt_localacktout', 'same'],
  ['infiniband.cm.req.ip_cm.majv', 'same'],
  ['infiniband.cm.req.ip_cm.minv', 'same'],
  ['infiniband.cm.req.ip_cm.ipv', 'same'],
  ['infiniband.cm.req.ip_cm.sport', 'role', 'cmport'],
  ['infiniband.cm.req.ip_cm.sip4', 'role', 'host'],
  ['infiniband.cm.req.ip_cm.dip4', 'role', 'host'],
  ['infiniband.cm.req.ip_cm.private', 'same'],
  ['infiniband.cm.rep.remotecommid', 'role', 'commid'],
  ['infiniband.cm.rep.localqkey', 'same'],
  ['infiniband.cm.rep.localqpn', 'role', 'qpn', 'src'],
  ['infiniband.cm.rep.localeecn', 'same'],
  ['infiniband.cm.rep.startpsn', 'role', 'psn0'],
  ['infiniband.cm.rep.respres', 'same'],
  ['infiniband.cm.rep.initdepth', 'same'],
  ['infiniband.cm.rep.tgtackdelay', 'same'],
  ['infiniband.cm.rep.failoveracc', 'same'],
  ['infiniband.cm.rep.e2eflowctrl', 'same'],
  ['infiniband.cm.rep.rnrretrcount', 'same'],
  ['infiniband.cm.rep.srq', 'same'],
  ['infiniband.cm.rep.localcaguid', 'role', 'guid'],
  ['infiniband.cm.rep.private', 'same'],
  ['infiniband.cm.rtu.localcommid', 'role', 'commid'],
  ['infiniband.cm.rtu.remotecommid', 'role', 'commid'],
  ['infiniband.cm.dreq.localcommid', 'role', 'commid'],
  ['infiniband.cm.dreq.remotecommid', 'role', 'commid'],
  ['infiniband.cm.req.remoteqpneecn', 'role', 'qpn', 'dst'],
];

/** Fields read besides FIELDS: the frame, the direction, the bytes the ICRC is checked over. */
const EXTRA = ['frame.number', 'frame.p2p_dir', 'ip.flags', 'udp.payload', 'infiniband.aeth.syndrome'];
const NAMES = [...EXTRA, ...FIELDS.map((f) => f[0])];

/**
 * The RoCEv2 datagrams of `file` (frame numbers `from`..`to` when given), each a Map of field
 * name → text ('' where the packet has no such field). `dport`: the RoCE UDP port when not 4791.
 */
export function rocePackets(file, { from = 1, to = Infinity, dport = roce.ROCE_V2_UDP_PORT } = {}) {
  const args = ['-r', file, '-d', `udp.port==${dport},infiniband`, '-Y', `infiniband && udp.dstport == ${dport}`, '-T', 'fields', '-E', 'occurrence=f'];
  for (const n of NAMES) args.push('-e', n);
  const r = spawnSync('tshark', args, { encoding: 'utf8', maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`tshark -r ${file}: ${r.stderr}`);
  const out = [];
  for (const line of r.stdout.split('\n')) {
    if (line === '') continue;
    const cols = line.split('\t');
    const m = new Map(NAMES.map((n, i) => [n, cols[i] ?? '']));
    const no = Number(m.get('frame.number'));
    if (no >= from && no <= to) out.push(m);
  }
  return out;
}

/** RC/UC opcodes (low 5 bits) of responses: RDMA READ response first/middle/last/only, ACK, atomic ACK. */
const RESPONSE_OPCODES = new Set([0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12]);

/** The number a field's text stands for: `0x…`, `aa:bb:…` bytes, or decimal (BigInt). */
function num(text) {
  if (text === '') return null;
  if (text.includes(':')) return BigInt(`0x${text.replaceAll(':', '')}`);
  if (/^0x[0-9a-f]+$/i.test(text)) return BigInt(text);
  if (/^\d+$/.test(text)) return BigInt(text);
  if (/^\d+\.\d+\.\d+\.\d+$/.test(text)) return BigInt(text.split('.').reduce((a, x) => a * 256 + Number(x), 0));
  return text;
}

/**
 * Rewrite `pkts` as the rules say: role fields become `<space>#<n>` in order of first
 * appearance, PSNs become offsets from the first PSN of the same sender towards the same QP.
 * Returns one plain object per packet with only the compared fields.
 */
export function normalize(pkts) {
  const spaces = new Map();
  const token = (space, text) => {
    const v = num(text);
    if (v === null) return '';
    let m = spaces.get(space);
    if (m === undefined) spaces.set(space, (m = new Map()));
    if (!m.has(v)) m.set(v, m.size);
    return `${space}#${m.get(v)}`;
  };
  const base = new Map();
  return pkts.map((p) => {
    const o = {};
    const host = { src: token('host', p.get('ip.src') ?? ''), dst: token('host', p.get('ip.dst') ?? '') };
    for (const [name, rule, space, owner] of FIELDS) {
      const t = p.get(name) ?? '';
      if (rule === 'same') o[name] = t;
      else if (rule === 'role') o[name] = token(owner === undefined ? space : `${space}@${host[owner]}`, t);
      else if (rule === 'psn') {
        if (t === '') o[name] = '';
        else {
          // One sequence per sender and destination QP; responses (ACK, READ and atomic
          // responses) carry the PSNs of the requests they answer and count apart from the
          // requests their sender makes, from their own first one.
          const op = Number(p.get('infiniband.bth.opcode'));
          const response = RESPONSE_OPCODES.has(op & 0x1f) && op >> 5 <= 1;
          const k = `${host.src}>${host.dst}/${o['infiniband.bth.destqp']}${response ? '/responses' : ''}`;
          const psn = Number(t);
          if (!base.has(k)) base.set(k, psn);
          o[name] = `+${(psn - base.get(k) + 0x1000000) % 0x1000000}`;
        }
      }
    }
    return o;
  });
}

/**
 * Compare the normalized packets `ours` and `theirs` index by index, field by field: a list of
 * differences, each `#i field: ours ≠ kernel's`, at most `limit`.
 */
export function compareFields(ours, theirs, limit = 40) {
  const diffs = [];
  const n = Math.min(ours.length, theirs.length);
  for (let i = 0; i < n && diffs.length < limit; i++) {
    for (const [name, rule] of FIELDS) {
      if (rule === 'skip') continue;
      const a = ours[i][name];
      const b = theirs[i][name];
      if (a !== b) diffs.push(`#${i} (opcode ${theirs[i]['infiniband.bth.opcode']}) ${name}: ours ${JSON.stringify(a)} ≠ rxe ${JSON.stringify(b)}`);
    }
  }
  if (ours.length !== theirs.length) diffs.push(`packets: ours ${ours.length} ≠ rxe ${theirs.length}`);
  return diffs;
}

const ipBytes = (s) => Uint8Array.from(s.split('.').map(Number));

/**
 * Whether packet `p`'s ICRC is right for its captured IPv4/UDP header (ID, flags, addresses,
 * ports as written in the capture).
 */
export function icrcValid(p) {
  const payload = Buffer.from(p.get('udp.payload').replaceAll(':', ''), 'hex');
  // tshark: the 3 flag bits as a number, the fragment offset in bytes
  const flagsWord = (Number(p.get('ip.flags')) << 13) | (Number(p.get('ip.frag_offset')) >> 3);
  const net = {
    family: 4,
    src: ipBytes(p.get('ip.src')),
    dst: ipBytes(p.get('ip.dst')),
    sport: Number(p.get('udp.srcport')),
    dport: Number(p.get('udp.dstport')),
    ipId: Number(p.get('ip.id')),
    ipFlags: flagsWord & 0xffff,
  };
  const end = payload.length - 4;
  return roce.icrcCompute(net, payload, 0, end) === payload.readUInt32LE(end);
}

/** A table of the fields whose rule is `skip`, with the reason, for the test's messages. */
export const SKIPPED = FIELDS.filter((f) => f[1] === 'skip').map(([n, , why]) => `${n}: ${why}`);

/** BTH opcode of an RC ACKNOWLEDGE. */
const RC_ACK = '17';

/**
 * Compare two captures of one exchange sender by sender, robust to what timing changes: each
 * sender's packets other than ACKs in order, a packet that repeats an earlier one (same
 * destination QP, PSN and opcode: a retransmission) left out; the ACKs as the set of their
 * distinct field values apart from PSN and MSN (how many ACKs a responder sends, and which PSN
 * each one names, depends on when the requests arrive). `tail`: packets at the end of both left
 * out; `prefix`: only as many of each sender's packets of ours as the kernel's holds; `senders`:
 * the hosts compared (`host#0` sent the first packet).
 */
export function compareExchange(ours, kernel, { tail = 0, prefix = false, senders = ['host#0', 'host#1'] } = {}) {
  const cut = (l) => (tail > 0 ? l.slice(0, -tail) : l);
  const [o, k] = [cut(normalize(ours)), cut(normalize(kernel))];
  const diffs = [];
  const split = (l, host) => {
    const seen = new Set();
    const reqs = [];
    const acks = new Set();
    let repeats = 0;
    for (const p of l) {
      if (p['ip.src'] !== host) continue;
      if (p['infiniband.bth.opcode'] === RC_ACK) {
        const { ['infiniband.bth.psn']: _psn, ['infiniband.aeth.msn']: _msn, ...rest } = p;
        acks.add(JSON.stringify(rest));
        continue;
      }
      const key = `${p['infiniband.bth.destqp']}/${p['infiniband.bth.psn']}/${p['infiniband.bth.opcode']}`;
      if (seen.has(key)) {
        repeats++;
        continue;
      }
      seen.add(key);
      reqs.push(p);
    }
    return { reqs, acks: [...acks].sort(), repeats };
  };
  for (const host of senders) {
    const a = split(o, host);
    const b = split(k, host);
    const who = host === 'host#0' ? 'first sender' : 'second sender';
    diffs.push(...compareFields(prefix ? a.reqs.slice(0, b.reqs.length) : a.reqs, b.reqs).map((d) => `${who}: ${d}`));
    if (JSON.stringify(a.acks) !== JSON.stringify(b.acks)) diffs.push(`${who}: ACKs: ours ${a.acks.join(' ')} ≠ rxe ${b.acks.join(' ')}`);
  }
  return diffs;
}
