// The QP state machine on every device, for each QP type it offers: every (from, to) pair of
// distinct states is tried on a fresh QP brought to `from` with the attributes its rules require; the move
// must succeed exactly when the IB spec's graph (10.3.1) allows it. On devices that follow the IB
// attribute rules (not iWARP: siw checks only the graph) a move missing one required attribute,
// or carrying one the transition does not take, is EINVAL, and nothing changes. An iWARP QP
// reaches RTS only through its connection (siw_qp_nextstate_from_idle: RTS without the socket the
// CM hands over is EINVAL): there a modify to RTS is refused and the states past it are not tried.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { QpState, QpType, QpAttrMask, QP_STATE_TABLE, qpTransitionAllowed, TransportType, RdmaError } from '../../dist/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';

const M = QpAttrMask;
const S = [QpState.RESET, QpState.INIT, QpState.RTR, QpState.RTS, QpState.SQD, QpState.ERR];
/** The path from RESET to each state (SQE is reached only by a send error). */
const PATH = {
  [QpState.RESET]: [],
  [QpState.INIT]: [QpState.INIT],
  [QpState.RTR]: [QpState.INIT, QpState.RTR],
  [QpState.RTS]: [QpState.INIT, QpState.RTR, QpState.RTS],
  [QpState.SQD]: [QpState.INIT, QpState.RTR, QpState.RTS, QpState.SQD],
  [QpState.ERR]: [QpState.ERR],
};

/** Values for every attribute a transition may require, valid on `ctx`. */
function values(ctx, qp) {
  const port = ctx.queryPort(1);
  return {
    pkeyIndex: 0,
    portNum: 1,
    qkey: 0x11223344,
    qpAccessFlags: 0,
    ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: ctx.queryGid(1, 0), flowLabel: 0, sgidIndex: 0, hopLimit: 64, trafficClass: 0 } },
    pathMtu: port.activeMtu,
    destQpNum: qp.qpNum,
    rqPsn: 0,
    sqPsn: 0,
    maxDestRdAtomic: 1,
    maxRdAtomic: 1,
    minRnrTimer: 12,
    timeout: 14,
    retryCnt: 7,
    rnrRetry: 7,
  };
}

const FIELD = {
  [M.PKEY_INDEX]: 'pkeyIndex',
  [M.PORT]: 'portNum',
  [M.QKEY]: 'qkey',
  [M.ACCESS_FLAGS]: 'qpAccessFlags',
  [M.AV]: 'ahAttr',
  [M.PATH_MTU]: 'pathMtu',
  [M.DEST_QPN]: 'destQpNum',
  [M.RQ_PSN]: 'rqPsn',
  [M.SQ_PSN]: 'sqPsn',
  [M.MAX_DEST_RD_ATOMIC]: 'maxDestRdAtomic',
  [M.MAX_QP_RD_ATOMIC]: 'maxRdAtomic',
  [M.MIN_RNR_TIMER]: 'minRnrTimer',
  [M.TIMEOUT]: 'timeout',
  [M.RETRY_CNT]: 'retryCnt',
  [M.RNR_RETRY]: 'rnrRetry',
};

/** The attributes and mask of a move: exactly what the IB table requires for `type`. */
function move(from, to, type, v, dropBit = 0) {
  const req = (QP_STATE_TABLE[from][to]?.req[type] ?? 0) & ~dropBit;
  const attr = { qpState: to };
  for (const [bit, f] of Object.entries(FIELD)) if (req & Number(bit)) attr[f] = v[f];
  return { attr, mask: M.STATE | req };
}

for (const [type, cap] of [
  [QpType.RC, Cap.RC],
  [QpType.UC, Cap.UC],
  [QpType.UD, Cap.UD],
]) {
  forEachDevice(
    [cap],
    (d) => {
      const ctx = () => d.device.open();
      const fresh = () => {
        const c = ctx();
        const pd = c.allocPd();
        const cq = c.createCq(8);
        const qp = pd.createQp({ qpType: type, sendCq: cq, recvCq: cq, cap: { maxSendWr: 2, maxRecvWr: 2 } });
        return { qp, v: values(c, qp), done: () => (qp.destroy(), cq.destroy(), pd.dealloc()) };
      };
      const bring = (qp, v, state) => {
        let cur = QpState.RESET;
        for (const s of PATH[state]) {
          const m = move(cur, s, type, v);
          qp.modify(m.attr, m.mask);
          cur = s;
        }
        assert.equal(qp.state, state);
      };

      // Same-state modifies are attribute changes (INIT->INIT, RTS->RTS ...): the IB rules test
      // covers them; siw treats a modify to the current state as no move at all. An iWARP device
      // also ignores a request for INIT or RTR the graph does not take, as siw does: the modify
      // succeeds and the state stays.
      test(`${QpType[type]}: every move between two states happens exactly when the graph allows it`, () => {
        const iwarp = d.transportType === TransportType.IWARP;
        for (const from of S) {
          if (iwarp && PATH[from].includes(QpState.RTS)) continue;
          for (const to of [...S, QpState.SQE]) {
            if (to === from) continue;
            const { qp, v, done } = fresh();
            bring(qp, v, from);
            const m = move(from, to, type, v);
            const want = qpTransitionAllowed(from, to) && !(iwarp && to === QpState.RTS);
            const ignored = !want && d.transportType === TransportType.IWARP && (to === QpState.INIT || to === QpState.RTR);
            if (want) {
              qp.modify(m.attr, m.mask);
              assert.equal(qp.state, to, `${from} -> ${to}`);
            } else if (ignored) {
              qp.modify(m.attr, m.mask);
              assert.equal(qp.state, from, `${from} -> ${to} ignored`);
            } else {
              assert.throws(() => qp.modify(m.attr, m.mask), (e) => e instanceof RdmaError && e.code === 'EINVAL', `${from} -> ${to} refused`);
              assert.equal(qp.state, from, `${from} -> ${to} left the QP alone`);
            }
            done();
          }
        }
      });

      test(`${QpType[type]}: IB attribute rules (required and allowed attributes per transition)`, { skip: d.transportType === TransportType.IWARP ? 'iWARP checks the state graph only (siw)' : false }, () => {
        for (const from of S) {
          for (const to of S) {
            const tr = QP_STATE_TABLE[from][to];
            const req = tr?.req[type] ?? 0;
            if (!tr) continue;
            for (let bit = 1; bit <= req; bit <<= 1) {
              if (!(req & bit)) continue;
              const { qp, v, done } = fresh();
              bring(qp, v, from);
              const m = move(from, to, type, v, bit);
              assert.throws(() => qp.modify(m.attr, m.mask), (e) => e instanceof RdmaError && e.code === 'EINVAL', `${from} -> ${to} without bit ${bit}`);
              assert.equal(qp.state, from);
              done();
            }
          }
        }
        // An attribute the move does not take: RESET -> INIT with a path MTU.
        const { qp, v, done } = fresh();
        const m = move(QpState.RESET, QpState.INIT, type, v);
        assert.throws(() => qp.modify({ ...m.attr, pathMtu: v.pathMtu }, m.mask | M.PATH_MTU), (e) => e instanceof RdmaError && e.code === 'EINVAL');
        assert.equal(qp.state, QpState.RESET);
        done();
      });
    },
    QpType[type],
  );
}
