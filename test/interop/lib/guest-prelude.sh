#!/bin/bash
# guest-prelude.sh -- shell functions prepended to every interop guest job by refvm.js (withGuest).
# Runs in the reference VM with cwd = /mnt/host (the job folder, a 9p share of the host).
H=/mnt/host
gnow() { date +%T.%N | cut -c1-12; }
glog() { echo "[guest $(gnow)] $*"; }
# mark NAME: create NAME in the job folder (the host polls for it)
mark() { : > "$H/$1"; }
# waitfile PATH [SECS]: wait for a file (the host's signals), 1 on timeout
waitfile() { local f=$1 t=${2:-600} i=0; while [ ! -e "$f" ]; do sleep 0.2; i=$((i+1)); [ $i -ge $((t*5)) ] && return 1; done; return 0; }
# putrc NAME RC: NAME.rc, written atomically (the host waits for it)
putrc() { echo "$2" > "$H/$1.rc.tmp"; mv -f "$H/$1.rc.tmp" "$H/$1.rc"; }
# gdump NAME PID: what the processes under PID (a `timeout`) are doing -> NAME.hang: each
# thread's state, wait channel and kernel stack, the TCP sockets (siw's are kernel sockets, with
# their queues), the RDMA QPs and the kernel's last messages
gdump() { local n=$1 p=$2 c t
  { for c in $(pgrep -P "$p"); do echo "== pid $c: $(tr '\0' ' ' < /proc/$c/cmdline)"; grep -E '^(State|voluntary|nonvoluntary)' /proc/$c/status
      for t in /proc/$c/task/*; do echo "-- task ${t##*/} state $(cut -d' ' -f3 $t/stat) wchan $(cat $t/wchan)"; cat $t/stack; done; done
    echo "== ss -tnioa"; ss -tnioa; echo "== rdma res show qp"; rdma res show qp; echo "== dmesg"; dmesg | tail -30
  } > "$H/$n.hang" 2>&1; }
# gtool NAME SECS CMD...: run CMD with a deadline -> NAME.out NAME.err NAME.rc; returns its status.
# Its stdout is line-buffered (stdbuf), so what it printed survives the deadline's kill, and 2 s
# before the deadline a run still going is described in NAME.hang (gdump).
GLB=; command -v stdbuf > /dev/null && GLB="stdbuf -oL"
gtool() { local n=$1 t=$2 rc p w=; shift 2; glog "$n: $*"
  timeout -k 5 "$t" $GLB "$@" > "$H/$n.out" 2> "$H/$n.err" & p=$!
  if [ "$t" -gt 4 ]; then ( sleep $((t - 2)); kill -0 $p 2> /dev/null && gdump "$n" $p ) & w=$!; fi
  wait $p; rc=$?
  if [ -n "$w" ]; then pkill -P $w 2> /dev/null; kill $w 2> /dev/null; wait $w 2> /dev/null; fi
  [ -e "$H/$n.hang" ] && glog "$n: still running 2 s before its deadline: $n.hang"
  putrc "$n" $rc; glog "$n: exit $rc"; return $rc; }
# gstart NAME SECS CMD...: the same in the background; GPID = its pid; finish with gwait NAME $GPID
gstart() { local n=$1 t=$2; shift 2; glog "$n (background): $*"
  timeout -k 5 "$t" "$@" > "$H/$n.out" 2> "$H/$n.err" & GPID=$!; }
gwait() { local rc; wait "$2"; rc=$?; putrc "$1" $rc; glog "$1: exit $rc"; return $rc; }
# listening PORT / waitlisten PORT [SECS]: a TCP listener on PORT (siw's are kernel sockets)
listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
waitlisten() { local i=0; until listening "$1"; do sleep 0.2; i=$((i+1)); [ $i -ge $((${2:-60}*5)) ] && return 1; done; return 0; }
# cmlistening PORT / waitcm PORT [SECS]: an rdma_cm id listens on PORT (on rxe no TCP socket does)
cmlistening() { rdma res show cm_id 2>/dev/null | grep "state LISTEN" | grep -qE ":$1( |$)"; }
waitcm() { local i=0; until cmlistening "$1"; do sleep 0.2; i=$((i+1)); [ $i -ge $((${2:-60}*5)) ] && return 1; done; return 0; }
# Our package (/mnt/src) and node ($H/node) live on 9p shares, which every start of one of our
# tools would read across (hundreds of module files): copied once into the guest's memory and
# mounted over the originals, they are read from RAM. The copies are read-only views of the
# same files (the share is read-only; the node binary is not written).
if mountpoint -q /mnt/src 2> /dev/null && mkdir -p /run/src \
  && tar -C /mnt/src --exclude=./node_modules --exclude=./.git -cf - . | tar -C /run/src -xf - 2> /dev/null; then
  mount --bind /run/src /mnt/src && mount -o remount,ro,bind /mnt/src 2> /dev/null
fi
if [ -f "$H/node" ] && cp "$H/node" /run/node 2> /dev/null; then mount --bind /run/node "$H/node"; fi
# ---- end of prelude ----
