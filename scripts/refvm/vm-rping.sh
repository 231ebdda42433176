#!/bin/bash
# vm-rping.sh RPING-ARGS... -- the kernel's rping, run in a second reference VM (VM1,
# 10.77.0.3 on the refvm bridge), behaving like a host command: rping's stdout on stdout, its
# stderr on stderr, its exit status as ours. It stands in for our rping to prove the interop
# harness end to end before (or besides) our tool:
#
#   RPING_HOST_CMD=$PWD/scripts/refvm/vm-rping.sh RPING_HOST_ADDR=10.77.0.3 \
#   RPING_SERVER_READY='output:vm-rping: listening' RPING_TIMEOUT_SEC=240 \
#     node --test --test-concurrency=1 test/interop/rping.test.js
#
# In server mode (-s) it prints "vm-rping: listening on <port>" to stderr once the kernel
# listener is up in VM1. Every run boots VM1 afresh (≈20 s under TCG). The VM's console and
# job folder stay in $REFVM_DIR/runs/vm-rping-*.
# Env: REFVM_HOME (default <repo>/../shared/refvm), REFVM_DIR, VM_RPING_TIMEOUT (rping's
# deadline in the guest, default 240 s).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
REFVM_HOME=${REFVM_HOME:-$REPO/../shared/refvm}
REFVM_DIR=${REFVM_DIR:-/var/tmp/rdmacm-refvm}
T=${VM_RPING_TIMEOUT:-240}

server=0; port=7174; prev=
for a in "$@"; do
  [ "$a" = -s ] && server=1
  [ "$prev" = -p ] && port=$a
  prev=$a
done

mkdir -p "$REFVM_DIR/runs"
JOB=$(mktemp -d "$REFVM_DIR/runs/vm-rping-$(date +%Y%m%d-%H%M%S)-XXXX")
{
  printf 'timeout -k 5 %s rping' "$T"; printf ' %q' "$@"
  printf ' > /mnt/host/rping.out 2> /mnt/host/rping.err & p=$!\n'
  if [ $server = 1 ]; then
    printf 'for i in $(seq 300); do ss -Hltn "sport = :%s" | grep -q . && { : > /mnt/host/listening; break; }; sleep 0.2; done\n' "$port"
  fi
  printf 'wait $p; echo $? > /mnt/host/rping.rc\n'
} > "$JOB/.src.sh"

"$REFVM_HOME/refvm-run.sh" --net tap --vm 1 --rdma siw --job "$JOB" --timeout $((T + 120)) \
  -f "$JOB/.src.sh" > "$JOB/refvm-run.log" 2>&1 &
vmpid=$!
if [ $server = 1 ]; then
  while kill -0 $vmpid 2>/dev/null && [ ! -e "$JOB/listening" ]; do sleep 0.2; done
  [ -e "$JOB/listening" ] && echo "vm-rping: listening on $port (VM1, job $JOB)" >&2
fi
wait $vmpid
cat "$JOB/rping.out" 2>/dev/null
cat "$JOB/rping.err" >&2 2>/dev/null
if [ ! -f "$JOB/rping.rc" ]; then
  echo "vm-rping: no exit status from the guest; VM log:" >&2; tail -20 "$JOB/refvm-run.log" >&2
  exit 125
fi
exit "$(cat "$JOB/rping.rc")"
