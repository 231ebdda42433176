// The device tables on every device: ibv_query_gid_table (every non-zero GID of each port, with
// index, port, type — IB for iWARP ports — and the net device's interface index, as the kernel's
// rdma_query_gid_table) and ibv_get_pkey_index (the index of a P_Key, ENOENT when the table has
// none such).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { TransportType, RdmaError, GidType } from '../../dist/index.js';
import { forEachDevice } from '../lib/devices.js';

const code = (c) => (e) => e instanceof RdmaError && e.code === c;

function ifindex(ifname) {
  try {
    return Number(readFileSync(`/sys/class/net/${ifname}/ifindex`, 'utf8').trim());
  } catch {
    return 0;
  }
}

forEachDevice([], (d) => {
  test('ibv_query_gid_table: every non-zero GID of each port as ibv_query_gid gives it; max_entries too small: EINVAL', () => {
    const ctx = d.device.open();
    const iwarp = d.transportType === TransportType.IWARP;
    const table = ctx.queryGidTable();
    assert.throws(() => ctx.queryGidTable(-1), code('EINVAL'));
    const want = [];
    const ports = ctx.queryDevice().physPortCnt;
    for (let port = 1; port <= ports; port++) {
      for (let i = 0; i < ctx.queryPort(port).gidTblLen; i++) {
        const g = ctx.queryGid(port, i);
        // iWARP ports' entries are of type IB (cache.c config_non_roce_gid_cache)
        if (g.some((b) => b !== 0)) want.push({ port, i, g: [...g], type: iwarp ? GidType.IB : ctx.queryGidType(port, i) });
      }
    }
    // RoCE: a GID per address; siw: the interface MAC (none on loopback, whose MAC is zero)
    if (!iwarp) assert.ok(want.length >= 1, 'the device has GIDs');
    assert.equal(table.length, want.length);
    if (want.length === 0) return;
    table.forEach((e, k) => {
      const w = want[k];
      assert.deepEqual([e.portNum, e.gidIndex, [...e.gid], e.gidType], [w.port, w.i, w.g, w.type]);
      assert.ok(Object.values(GidType).includes(e.gidType));
      assert.equal(e.ndevIfindex, ifindex(d.device.info.ifname), 'the interface index of the device\'s net device');
    });
    assert.equal(ctx.queryGidTable(want.length).length, want.length, 'exactly enough room');
    assert.throws(() => ctx.queryGidTable(want.length - 1), code('EINVAL'), 'one entry short');
    table[0].gid.fill(0xee);
    assert.deepEqual([...ctx.queryGidTable()[0].gid], want[0].g, 'entries are copies');
  });

  test('ibv_get_pkey_index: the default P_Key at index 0 where the port has a table; ENOENT for a P_Key it lacks; EINVAL for a bad port', () => {
    const ctx = d.device.open();
    const len = ctx.queryPort(1).pkeyTblLen;
    if (len > 0) assert.equal(ctx.getPkeyIndex(1, 0xffff), 0);
    else assert.throws(() => ctx.getPkeyIndex(1, 0xffff), code('ENOENT'), 'no P_Key table');
    const absent = [0x1234, 0x7fff, 0].find((p) => !Array.from({ length: len }, (_, i) => ctx.queryPkey(1, i)).includes(p));
    assert.throws(() => ctx.getPkeyIndex(1, absent), code('ENOENT'));
    assert.throws(() => ctx.getPkeyIndex(ctx.queryDevice().physPortCnt + 1, 0xffff), code('EINVAL'));
  });
});
