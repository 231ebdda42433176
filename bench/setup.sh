#!/bin/sh
# Install the C baselines `npm run bench` measures beside ours: rdma-core's rstream (Debian's
# rdmacm-utils; `rstream -T s` runs over kernel TCP, no RDMA device needed) and qperf. Needs apt
# and root (or sudo); where either is missing it says so, and the bench prints its tables without
# those columns.
set -u
need=""
command -v rstream >/dev/null 2>&1 || need="$need rdmacm-utils"
command -v qperf >/dev/null 2>&1 || need="$need qperf"
if [ -z "$need" ]; then
  echo "bench/setup.sh: rstream and qperf are installed"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "bench/setup.sh: no apt-get here; install$need by hand for the C columns" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
    echo "bench/setup.sh: not root and no sudo; install$need by hand for the C columns" >&2
    exit 0
  fi
fi
echo "bench/setup.sh: installing$need"
if $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null; then
  echo "bench/setup.sh: installed$need"
else
  echo "bench/setup.sh: apt-get could not install$need; the bench runs without those columns" >&2
fi
exit 0
