#!/usr/bin/env node
// `npm run test:interop`: the interop suite (test/interop/*.test.js) in two lanes that run at the
// same time, each booting its guests on its own VM slot (tap rvtap<n>, guest 10.77.0.(2+n)):
//   host lane  (slot 0): every file whose host processes talk to the guest over the bridge;
//   guest lane (slot 1): the files marked `// interop lane: guest` in their first lines, whose
//              tools all run inside the guest (the native backend), so nothing of theirs listens
//              on the host side that a host-lane file could collide with.
// Within a lane the files run one at a time, as before. Each lane's output is printed whole when
// the lane ends (two live TAP streams would interleave line by line); a line says when each ends.
// `REFVM_LANES=1` runs every file in one lane, on slot 0. Arguments: files to run instead of all.
// Before the lanes start, the VM image is built once if missing (REFVM_BUILD=1) and the `refvm`
// namespace made, so that the lanes never race to do either. Exit status: the worse lane's.
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DIR = join(ROOT, 'test', 'interop');
const GUEST_MARK = /^\/\/ interop lane: guest\b/m;

const files = process.argv.length > 2
  ? process.argv.slice(2)
  : readdirSync(DIR).filter((f) => f.endsWith('.test.js')).sort().map((f) => join(DIR, f));
const head = (f) => readFileSync(f, 'utf8').split('\n').slice(0, 40).join('\n');
const oneLane = process.env.REFVM_LANES === '1';
const lanes = oneLane
  ? [{ name: 'all', vm: 0, files }]
  : [
      { name: 'host', vm: 0, files: files.filter((f) => !GUEST_MARK.test(head(f))) },
      { name: 'guest', vm: 1, files: files.filter((f) => GUEST_MARK.test(head(f))) },
    ].filter((l) => l.files.length > 0);

// Build the image (REFVM_BUILD=1) and make the namespace once, here. When the VM cannot run, the
// lanes' files skip loudly on their own (refvm.js says why); they are told not to build again.
const { refvmAvailable, REFVM_HOME } = await import(join(ROOT, 'test', 'interop', 'lib', 'refvm.js'));
const avail = await refvmAvailable();
const laneEnv = { ...process.env };
if (avail.ok) {
  const up = spawnSync(join(REFVM_HOME, 'refvm-netns.sh'), ['up'], { encoding: 'utf8', timeout: 30_000 });
  if (up.status !== 0) console.log(`!!! refvm-netns.sh up failed (${up.status}): ${up.stderr}`);
} else {
  laneEnv.REFVM_BUILD = '0';
}

function runLane(lane) {
  const t0 = Date.now();
  const args = ['--test', '--test-concurrency=1', '--test-timeout=1200000', ...lane.files];
  console.log(`=== interop lane ${lane.name} (VM slot ${lane.vm}): ${lane.files.map((f) => relative(ROOT, f)).join(' ')}`);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...laneEnv, REFVM_VM: String(lane.vm) }, stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => out.push(d));
    child.on('close', (code, signal) => {
      const min = ((Date.now() - t0) / 60_000).toFixed(1);
      process.stdout.write(`=== interop lane ${lane.name} output\n`);
      process.stdout.write(Buffer.concat(out));
      console.log(`=== interop lane ${lane.name} (VM slot ${lane.vm}) ended: ${signal ?? `exit ${code}`} after ${min} min`);
      resolve(code ?? 1);
    });
  });
}

const codes = await Promise.all(lanes.map(runLane));
process.exitCode = Math.max(0, ...codes);
