// bench/roce-io.js end to end in its smoke mode: every row is printed for every path the process
// can use (mmsg where the addon is built, dgram, Node dgram) with its ratio and CPU per message,
// and the --json file holds them. Figures are never checked: speed is measured by `npm run bench`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BENCH = fileURLToPath(new URL('../../bench/roce-io.js', import.meta.url));
const { mmsgAvailable } = await import('../../dist/transport/roce/udp-mmsg.js');

test('bench/roce-io.js --quick prints every row for every path and writes them as JSON', { timeout: 180_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-roce-io-'));
  try {
    const file = join(dir, 'out.json');
    const r = spawnSync(process.execPath, [BENCH, '--quick', '--json', file], { encoding: 'utf8', timeout: 170_000 });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    const paths = mmsgAvailable() ? ['node', 'mmsg', 'dgram'] : ['node', 'dgram'];
    for (const row of ['UD 4 KiB send to a UDP peer', 'UD 4 KiB receive from a UDP peer', 'multicast 4 KiB, 1 receiver']) {
      const line = r.stdout.split('\n').find((l) => l.startsWith(row));
      assert.ok(line, `row ${row} printed:\n${r.stdout}`);
      // rates, ratios to Node, CPU per message
      assert.equal(line.slice(row.length).trim().split(/\s+/).length, paths.length * 3 - 1, line);
    }
    const j = JSON.parse(readFileSync(file, 'utf8')).sections.roceIo;
    assert.deepEqual(j.paths, paths);
    assert.equal(j.rows.length, 3);
    for (const row of j.rows) for (const p of paths) assert.ok(row[p].rate > 0 && row[p].cpu > 0, `${row.name} ${p}: ${JSON.stringify(row[p])}`);
    for (const row of j.rows) for (const run of row.runs.mmsg ?? []) assert.equal(run.path, 'mmsg', 'the mmsg rows ran on the batched path');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
