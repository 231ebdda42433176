// CM request and communication IDs of the soft RoCE device: the QPN block of the process in the
// high bits (the GSI router of the host finds the process by it), the rest drawn at random and
// never the ID of a request or connection the process still holds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import '../../../../lib/roce.js';

const { newRequestId, releaseRequestId, REQ_ID_SHIFT } = await import('../../../../../dist/transport/roce/cm/ids.js');

/** A port agent that owns QPN block `b` (all newRequestId asks of it). */
const agentOf = (b) => ({ anyBlock: () => b });

test('request IDs: the QPN block in the high bits, the low 18 bits random (not a sequence) and unique among the IDs held; a released ID may come again', () => {
  const agent = agentOf(0x1234);
  const n = 20_000;
  const ids = [];
  for (let i = 0; i < n; i++) ids.push(newRequestId(agent));
  try {
    assert.ok(ids.every((id) => id >>> REQ_ID_SHIFT === 0x1234), 'every ID names the block');
    assert.equal(new Set(ids).size, n, 'no ID handed out twice while held');
    const low = ids.map((id) => id & ((1 << REQ_ID_SHIFT) - 1));
    let successors = 0;
    for (let i = 1; i < n; i++) if (low[i] === ((low[i - 1] + 1) & ((1 << REQ_ID_SHIFT) - 1))) successors++;
    // A random draw follows its predecessor by one with probability 2^-18: a handful at most.
    assert.ok(successors < 20, `${successors} of ${n} IDs were their predecessor + 1`);
    // Spread over the whole 18-bit space: each quarter holds about a quarter of them.
    const quarters = [0, 0, 0, 0];
    for (const v of low) quarters[v >>> (REQ_ID_SHIFT - 2)]++;
    assert.ok(quarters.every((q) => q > n / 4 - 600 && q < n / 4 + 600), `quarters ${quarters}`);
  } finally {
    for (const id of ids) releaseRequestId(id);
  }
  // Released IDs are free again: with 2^18 of them and nothing held, no draw collides.
  const again = newRequestId(agent);
  assert.equal(again >>> REQ_ID_SHIFT, 0x1234);
  releaseRequestId(again);
});
