#!/bin/bash
# Profile the heap of one host in a benchmark: the benchmarks start the host that
# TESSERA_BIN names, so point it here and this script starts the HEAPTRACK_WHICH-th
# `tessera run` (default: the second) under Debian's heaptrack; the others run as they
# are. A `--replicas` failover kills the leader: if that is the profiled host, the kill
# hits heaptrack, not the host under it, which runs on (holding its Lease, so nothing
# moves and the failover figures mean nothing) until ended with SIGINT. The profile lands in HEAPTRACK_OUT
# (default /tmp/tessera-heaptrack) once that host ends: a killed benchmark leaves it
# running, end it with SIGINT. Read it with `heaptrack_print -f <file>`.
#
#   cargo build --release -p tessera -p tessera-tests --bins
#   HEAPTRACK_REAL_BIN=$target/release/tessera TESSERA_BIN=tests/profile/heaptrack-host.sh \
#     TESSERA_PLUGIN_DIR=$target/plugins TESSERA_TEST_PLUGIN_DIR=$target/test-plugins \
#     TESSERA_KUBE_APISERVER=... $target/release/load --runtimes 1000 --replicas 3
set -euo pipefail
real=${HEAPTRACK_REAL_BIN:?the tessera binary to run}
out=${HEAPTRACK_OUT:-/tmp/tessera-heaptrack}
if [[ " $* " != *" run "* ]]; then exec "$real" "$@"; fi
mkdir -p "$out"
n=$(flock "$out/.lock" bash -c 'n=$(( $(cat "$1/.count" 2>/dev/null || echo 0) + 1 )); echo $n > "$1/.count"; echo $n' _ "$out")
if [ "$n" = "${HEAPTRACK_WHICH:-2}" ]; then
  exec heaptrack -o "$out/host$n" "$real" "$@"
fi
exec "$real" "$@"
