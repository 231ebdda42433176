// An off-path attacker against RC connections of the soft RoCE device. It makes ordinary
// connections to a server (a process of its own, rc-server-peer.js), collects the starting PSN
// the server put in each REP (the PSN our QP sends from), and solves for the state of V8's
// Math.random (xorshift128+, test/lib/v8-random.js) as if the server drew its PSNs from it.
// Then, while another client's connection is up but has sent nothing yet, it sprays forged RC
// SENDs from a plain UDP socket — the client's address, the predicted PSN, the predicted QPN and
// (worst case) the true one — and checks that the server takes none of them: the client's own
// first SEND is the first message the server gets, and the connection goes on.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import dgram from 'node:dgram';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { PORT, lib, wire, pollN, WrOpcode, SendFlags, WcStatus, QpState } from '../../../lib/roce.js';
import { expectEvent } from '../../../lib/cm.js';
import { predictNextMathRandom } from '../../../lib/v8-random.js';
import { arrivals } from '../../../lib/arrivals.js';

const { createEventChannel, createId, PortSpace, CmEventType } = lib;
const { IbOpcode, encodeRocePacket } = wire;
const SERVER = fileURLToPath(new URL('./rc-server-peer.js', import.meta.url));
const LO = '127.0.0.1';
const V4 = (s) => Uint8Array.from(s.split('.').map(Number));
/** Connections the attacker watches before it predicts. */
const WATCHED = 10;
/** Copies of each forged packet. */
const COPIES = 4;
const children = new Set();
/** Ids still to destroy, also after a failed assertion (a live QP keeps the event loop open). */
const ids = new Set();
after(async () => {
  for (const c of children) c.kill('SIGKILL');
  for (const id of ids) {
    try {
      if (id.qp) id.destroyQp();
    } catch {
      // already gone
    }
    await Promise.race([id.destroy().catch(() => {}), new Promise((r) => setTimeout(r, 500))]);
  }
});

/** Start the server; `lines` collects what it prints. */
async function server(port) {
  const c = spawn(process.execPath, [SERVER, String(port)], { env: { ...process.env, RDMACM_ROCE_PORT: String(PORT) }, stdio: ['pipe', 'pipe', 'inherit'] });
  children.add(c);
  c.on('exit', () => children.delete(c));
  const box = arrivals();
  const lines = box.items;
  createInterface({ input: c.stdout }).on('line', (l) => box.push(JSON.parse(l)));
  const until = (pred, ms, what) => box.until(pred, ms, `server: ${what}`);
  await until(() => lines.some((x) => x.listening), 10_000, 'listening');
  return { proc: c, lines, until, stop: () => c.stdin.end() };
}


/** An ordinary client connection to the server; the QP's starting PSN and peer QPN as the REP gave them. */
async function connect(ch, port) {
  const id = createId(ch, null, PortSpace.TCP, { device: 'rxe_lo' });
  ids.add(id);
  await id.resolveAddr({ address: LO, port: 0 }, { address: LO, port }, 2000);
  await expectEvent(ch, CmEventType.ADDR_RESOLVED, 5000, { ack: true });
  await id.resolveRoute(2000);
  await expectEvent(ch, CmEventType.ROUTE_RESOLVED, 5000, { ack: true });
  id.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  await id.connect();
  await expectEvent(ch, CmEventType.ESTABLISHED, 5000, { ack: true });
  const a = id.qp.query();
  return { id, psn: a.sqPsn, qpn: a.destQpNum };
}

async function close(ch, id) {
  await id.disconnect();
  await expectEvent(ch, CmEventType.DISCONNECTED, 5000, { ack: true });
  id.destroyQp();
  await id.destroy();
  ids.delete(id);
}

test('the predictor recovers V8\'s Math.random from ten 24-bit outputs (so it is a real attacker)', () => {
  for (let run = 0; run < 4; run++) {
    for (let i = (run * 37) % 64; i > 0; i--) Math.random();
    const seen = [];
    for (let i = 0; i < WATCHED; i++) seen.push(Math.floor(Math.random() * 0x1000000));
    const next = Math.floor(Math.random() * 0x1000000);
    assert.ok(predictNextMathRandom(seen).includes(next), `run ${run}: the next output foreseen`);
  }
});

test('an off-path attacker that watched ten connections cannot foresee the next starting PSN; its spray of forged SENDs is not delivered and the connection goes on', async (t) => {
  const port = 20000 + Math.floor(Math.random() * 30000);
  const srv = await server(port);
  const ch = createEventChannel();
  t.after(() => ch.destroy());
  // The attacker's own connections: what their REPs told it.
  const psns = [];
  const qpns = [];
  for (let i = 0; i < WATCHED; i++) {
    const c = await connect(ch, port);
    psns.push(c.psn);
    qpns.push(c.qpn);
    await close(ch, c.id);
  }
  const predicted = predictNextMathRandom(psns);
  const step = qpns[WATCHED - 1] - qpns[WATCHED - 2];
  const qpnGuess = (qpns[WATCHED - 1] + step) & 0xffffff;

  // The victim's connection: up, nothing sent yet.
  const victim = await connect(ch, port);
  const sock = dgram.createSocket('udp4');
  sock.bind(0, LO);
  await once(sock, 'listening');
  const net = { family: 4, src: V4(LO), dst: V4(LO), sport: sock.address().port, dport: PORT };
  // Without a prediction the attacker still fires at a guess (it then only exercises the window).
  const psnTargets = predicted.length > 0 ? predicted : [(psns[WATCHED - 1] + 1) & 0xffffff];
  let sent = 0;
  for (const psn of psnTargets) {
    for (const destQp of new Set([qpnGuess, victim.qpn])) {
      const pkt = encodeRocePacket({ opcode: IbOpcode.RC_SEND_ONLY, destQp, psn, ackReq: true, payload: Buffer.from('INJECTED by an off-path sender') }, net);
      for (let k = 0; k < COPIES; k++) {
        await new Promise((r) => sock.send(pkt, PORT, LO, r));
        sent++;
      }
    }
  }
  await new Promise((r) => setTimeout(r, 150));
  sock.close();

  // The client's own first SEND.
  const text = Buffer.from('the client\'s first SEND');
  const mr = victim.id.pd.regMr(text, 0);
  victim.id.qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: mr.addr, length: text.length, lkey: mr.lkey }] });
  const [wc] = await pollN(victim.id.qp.sendCq, 1, 5000);
  await srv.until(() => srv.lines.some((x) => x.qpn === victim.qpn), 5000, 'message on the victim\'s connection');
  await new Promise((r) => setTimeout(r, 100));
  const got = srv.lines.filter((x) => x.msg !== undefined);

  assert.ok(sent >= COPIES);
  assert.deepEqual(got.filter((x) => x.msg.includes('INJECTED')), [], 'no forged SEND delivered');
  assert.deepEqual(got.filter((x) => x.qpn === victim.qpn).map((x) => x.msg), [text.toString()], 'the client\'s SEND is the first and only message of its connection');
  assert.equal(wc?.status, WcStatus.SUCCESS, 'the client\'s SEND completes');
  assert.equal(victim.id.qp.query().qpState, QpState.RTS, 'the connection goes on');
  assert.ok(!predicted.includes(victim.psn), `the attacker foresaw the starting PSN 0x${victim.psn.toString(16)} (it predicted ${predicted.map((p) => '0x' + p.toString(16)).join(', ')})`);

  mr.dereg();
  await close(ch, victim.id);
  srv.stop();
  await once(srv.proc, 'exit');
});
