// One-off: record the kernel rxe's side of ibv_rc_pingpong and ibv_ud_pingpong for a capture
// fixture (node capture-pingpong.mjs; REFVM_VM picks the VM slot, default 1). rdma-core's tool
// serves on the guest's rxe0; our tool, the client, runs on the host's soft RoCE device
// (rxe_rvbr0, UDP port 4791); tcpdump on the host's bridge writes pingpong.pcap into the job
// folder: RC, 10 round trips of 4096-byte SENDs (four packets each at path MTU 1024), then UD,
// 10 round trips of 512 bytes.
import { join } from 'node:path';
import { withGuest, REPO_ROOT, REFVM_HOME, run, log, guestIp, vmSlot } from './refvm.js';

const VM = vmSlot(1);
const GUEST = guestIp(VM);
const hex = GUEST.split('.').slice(2).map((x) => Number(x).toString(16).padStart(2, '0')).join('');
const job = `
GIDX=-1; for f in /sys/class/infiniband/rxe0/ports/1/gids/*; do
  [ "$(cat $f)" = "0000:0000:0000:0000:0000:ffff:0a4d:${hex}" ] && { GIDX=\${f##*/}; break; }; done
glog "rxe0 GID index of ${GUEST}: $GIDX"
mark ready
gstart R-k 120 ibv_rc_pingpong -d rxe0 -g $GIDX -n 10; P=$GPID
waitlisten 18515 60 || glog "R: no listener"
mark ready-R
gwait R-k $P
gstart U-k 120 ibv_ud_pingpong -d rxe0 -g $GIDX -n 10 -s 512; P=$GPID
waitlisten 18515 60 || glog "U: no listener"
mark ready-U
gwait U-k $P
true
`;
const up = await run(join(REFVM_HOME, 'refvm-netns.sh'), ['up'], { timeoutMs: 30_000 });
if (up.code !== 0) throw new Error(`refvm-netns.sh up: ${up.stderr}`);
const env = { RDMACM_ROCE_PORT: '', RDMACM_BACKEND: 'soft', RDMACM_PP_TIMEOUT_MS: '20000' };
const cli = (t) => join(REPO_ROOT, 'dist', 'cli', `${t}.js`);
const res = await withGuest({ name: 'capture-pingpong', rdma: 'rxe', vm: VM, job, timeoutSec: 500 }, async (ctx) => {
  const stop = await ctx.capture('pingpong.pcap', `host ${GUEST} and udp port 4791`, { snap: 8192, timeoutMs: 480_000 });
  try {
    for (const [tag, tool, extra] of [['R', 'ibv_rc_pingpong', []], ['U', 'ibv_ud_pingpong', ['-s', '512']]]) {
      await ctx.waitFile(`ready-${tag}`, 300_000);
      const r = await ctx.hostStart(process.execPath, [cli(tool), '-d', 'rxe_rvbr0', '-g', '1', '-n', '10', ...extra, GUEST], { timeoutMs: 120_000, env }).done;
      log(`${tool}: ours exit ${r.code}\n${r.stdout}${r.stderr}`);
      await ctx.waitFile(`${tag}-k.rc`, 150_000).catch(() => {});
      const g = ctx.result(`${tag}-k`);
      log(`${tool}: kernel exit ${g.rc}\n${g.out}${g.err}`);
    }
  } finally {
    await stop();
  }
});
log(`job folder ${res.jobDir}`);
