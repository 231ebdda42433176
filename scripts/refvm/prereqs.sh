#!/bin/bash
# prereqs.sh -- install what the reference VM needs on the host (qemu, the image build's tools,
# rdma-core's headers for the native addon), from Debian's packages, if anything is missing. Exit 0 when all is there afterwards, 1 when
# not (the interop suite then skips loudly). Needs root.
set -uo pipefail
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v qemu-img >/dev/null           || need+=(qemu-utils)
command -v debootstrap >/dev/null        || need+=(debootstrap)
command -v mkfs.ext4 >/dev/null          || need+=(e2fsprogs)
command -v cpio >/dev/null               || need+=(cpio)
command -v tcpdump >/dev/null            || need+=(tcpdump)
command -v ip >/dev/null                 || need+=(iproute2)
# rdma-core's headers: the native addon the native interop test shares into the guest.
[ -e /usr/include/infiniband/verbs.h ]   || need+=(libibverbs-dev)
[ -e /usr/include/rdma/rdma_cma.h ]      || need+=(librdmacm-dev)
[ ${#need[@]} = 0 ] && { echo "refvm prereqs: all present"; exit 0; }
echo "refvm prereqs: installing ${need[*]}"
if [ "$(id -u)" != 0 ]; then echo "refvm prereqs: not root, cannot apt-get install" >&2; exit 1; fi
export DEBIAN_FRONTEND=noninteractive
timeout 600 apt-get update -qq || echo "refvm prereqs: apt-get update failed" >&2
timeout 900 apt-get install -y -qq --no-install-recommends \
  qemu-system-x86 qemu-utils debootstrap e2fsprogs cpio tcpdump iproute2 libibverbs-dev librdmacm-dev || {
  echo "refvm prereqs: apt-get install failed" >&2; exit 1; }
command -v qemu-system-x86_64 >/dev/null && command -v debootstrap >/dev/null
