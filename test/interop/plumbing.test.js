// Plumbing of the interop suite, with no code of ours on either side: one boot of the
// reference VM (siw, tap network) checks that
//   - the guest reaches the host side (ICMP, and TCP to a listener in the refvm namespace),
//   - the host side reaches the kernel siw listener of a guest `rping -s` on 10.77.0.2:7174
//     and gets the kernel's MPA Reply ($REFVM_HOME/probes/mpa_probe.py, rev 1 and 2),
//   - the kernel's own rping, client and server in the guest, prints exactly the lines that
//     lib/rping-pattern.js generates (the expectations rping.test.js holds our rping to).
// When rping.test.js fails, this file tells whether the VM, the network or our tool is at fault.
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { existsSync, statSync } from 'node:fs';
import { withGuest, requireRefvm, REFVM_HOME, HOST_IP } from './lib/refvm.js';
import { rpingStdout, assertRpingStdout, unexpectedStderr } from './lib/rping-pattern.js';

const KK = [ // kernel <-> kernel rping in the guest
  { title: 'size 26 (minimum)', size: 26, count: 3 },
  { title: 'size 64', size: 64, count: 3 },
  { title: 'size 4096', size: 4096, count: 3 },
  { title: 'size 65535 (maximum)', size: 65535, count: 3 },
  { title: 'default size, -C 60 (letters wrap past z)', size: undefined, count: 60 },
  { title: 'default size, -C 10 -V without -v (prints no data)', size: undefined, count: 10, quiet: true },
];
const kkArgs = (s) => ['-C', String(s.count), '-V', ...(s.quiet ? [] : ['-v']), ...(s.size ? ['-S', String(s.size)] : [])].join(' ');
const TCP_PORT = 7999;
const MPA_PORT = 7174;

const guestJob = `
glog "eth0: $(ip -br addr show eth0)"; glog "rdma: $(rdma link show)"
mark ready
gtool ping-host 30 ping -c 3 -W 3 $REFVM_PEER

# siw listener for the host's MPA probes: a rping server restarted after every connection
( while [ ! -e $H/mpa-done ]; do timeout 40 rping -s -a $REFVM_IP -p ${MPA_PORT} -v -C 1; echo "[rping -s exit $?]"; done ) > $H/mpa-server.txt 2>&1 &
if waitlisten ${MPA_PORT} 60; then mark mpa-ready; else glog "rping -s never listened on ${MPA_PORT}"; mark mpa-ready; fi
waitfile $H/mpa-done 300

waitfile $H/tcp-go 120 && gtool nc-host 30 bash -c "echo hello-from-guest-$REFVM_IP | nc -N -w 10 $REFVM_PEER ${TCP_PORT}"

${KK.map((s, i) => `
gstart kk-srv-${i} 180 rping -s -a $REFVM_IP -p ${7190 + i} ${kkArgs(s)}; sp=$GPID
waitlisten ${7190 + i} 60 || glog "kk-srv-${i} not listening"
gtool kk-cli-${i} 180 rping -c -a $REFVM_IP -p ${7190 + i} ${kkArgs(s)}
gwait kk-srv-${i} $sp`).join('\n')}
glog "rping versions: $(dpkg-query -W rdmacm-utils rdma-core 2>/dev/null | tr '\\n' ' ')"
true
`;

test('interop plumbing: reference VM, tap network, kernel siw + rping', async (t) => {
  if (!(await requireRefvm(t))) return;
  const res = await withGuest({ name: 'plumbing', rdma: 'siw', job: guestJob, timeoutSec: 900 }, async (ctx) => {
    t.diagnostic(`guest ready ${(ctx.bootMs / 1000).toFixed(1)} s after the VM start; job folder ${ctx.jobDir}`);

    await t.test('guest -> host side ICMP (ping 10.77.0.1 from the guest)', async () => {
      await ctx.waitFile('ping-host.rc', 60_000);
      const r = ctx.result('ping-host');
      assert.equal(r.rc, 0, `ping from the guest failed:\n${r.out}${r.err}`);
    });

    await t.test(`host side -> guest siw listener ${ctx.guestIp}:${MPA_PORT}: MPA Request gets the kernel's MPA Reply`, async (tt) => {
      try {
        await ctx.waitFile('mpa-ready', 90_000);
        const probe = join(REFVM_HOME, 'probes', 'mpa_probe.py');
        if (!existsSync(probe)) { tt.skip(`no ${probe}`); return; }
        for (const rev of ['1', '2']) {
          const r = await ctx.hostRun('python3', [probe, ctx.guestIp, String(MPA_PORT), '--rev', rev], { timeoutMs: 60_000 });
          tt.diagnostic(`mpa_probe --rev ${rev} (exit ${r.code}):\n${r.stdout.trim()}`);
          if (r.code === 127 && /ENOENT|not found/i.test(r.stderr)) { tt.skip('python3 not available on the host'); return; }
          assert.equal(r.code, 0, `mpa_probe.py --rev ${rev} exit ${r.code}\n${r.stdout}${r.stderr}`);
          assert.match(r.stdout, /got MPA Reply .* rev=\d/, 'no MPA Reply from the kernel');
          assert.doesNotMatch(r.stdout, /REJECTED/);
          await new Promise((ok) => setTimeout(ok, 3000)); // the guest restarts rping -s
        }
      } finally {
        ctx.touch('mpa-done');
      }
    });

    await t.test(`guest -> host side TCP (nc to ${HOST_IP}:${TCP_PORT} in the refvm namespace)`, async () => {
      const server = `const s=require('net').createServer(c=>{let d='';c.on('data',b=>d+=b);c.on('end',()=>{console.log('got:'+d.trim());c.end('pong-from-host\\n');s.close();});});s.listen(${TCP_PORT},'${HOST_IP}',()=>console.log('listening'));`;
      const srv = ctx.hostStart(process.execPath, ['-e', server], { timeoutMs: 120_000 });
      for (let i = 0; i < 100 && !/listening/.test(srv.output()); i++) await new Promise((ok) => setTimeout(ok, 100));
      ctx.touch('tcp-go');
      await ctx.waitFile('nc-host.rc', 90_000);
      const g = ctx.result('nc-host');
      const h = await srv.done;
      assert.equal(g.rc, 0, `nc in the guest failed: ${g.out}${g.err}`);
      assert.match(h.stdout, /got:hello-from-guest-10\.77\.0\.2/, `host listener output: ${h.stdout}${h.stderr}`);
      assert.match(g.out, /pong-from-host/);
    });

    for (const [i, s] of KK.entries()) {
      await t.test(`kernel rping client+server in the guest print the generated lines: ${s.title}`, async () => {
        await ctx.waitFile(`kk-srv-${i}.rc`, 400_000);
        const c = ctx.result(`kk-cli-${i}`), sv = ctx.result(`kk-srv-${i}`);
        assert.equal(c.rc, 0, `kernel rping client exit ${c.rc}: ${c.err}`);
        assert.equal(sv.rc, 0, `kernel rping server exit ${sv.rc}: ${sv.err}`);
        assertRpingStdout(c.out, s.quiet ? '' : rpingStdout({ count: s.count, size: s.size, role: 'client' }), 'kernel rping -c');
        assertRpingStdout(sv.out, s.quiet ? '' : rpingStdout({ count: s.count, size: s.size, role: 'server' }), 'kernel rping -s');
        assert.deepEqual(unexpectedStderr(c.err, 'client'), [], `kernel rping -c stderr:\n${c.err}`);
        assert.deepEqual(unexpectedStderr(sv.err, 'server'), [], `kernel rping -s stderr:\n${sv.err}`);
      });
    }
  });
  t.diagnostic(`VM: boot ${(res.bootMs / 1000).toFixed(1)} s, total ${(res.wallMs / 1000).toFixed(1)} s; guest job rc ${res.jobRc}; ${res.jobDir}`);
  assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
  assert.ok(statSync(join(res.jobDir, 'guest.log')).size > 0);
});
