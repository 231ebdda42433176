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
# gtool NAME SECS CMD...: run CMD with a deadline -> NAME.out NAME.err NAME.rc; returns its status
gtool() { local n=$1 t=$2 rc; shift 2; glog "$n: $*"
  timeout -k 5 "$t" "$@" > "$H/$n.out" 2> "$H/$n.err"; rc=$?
  putrc "$n" $rc; glog "$n: exit $rc"; return $rc; }
# gstart NAME SECS CMD...: the same in the background; GPID = its pid; finish with gwait NAME $GPID
gstart() { local n=$1 t=$2; shift 2; glog "$n (background): $*"
  timeout -k 5 "$t" "$@" > "$H/$n.out" 2> "$H/$n.err" & GPID=$!; }
gwait() { local rc; wait "$2"; rc=$?; putrc "$1" $rc; glog "$1: exit $rc"; return $rc; }
# listening PORT / waitlisten PORT [SECS]: a TCP listener on PORT (siw's are kernel sockets)
listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
waitlisten() { local i=0; until listening "$1"; do sleep 0.2; i=$((i+1)); [ $i -ge $((${2:-60}*5)) ] && return 1; done; return 0; }
# ---- end of prelude ----
