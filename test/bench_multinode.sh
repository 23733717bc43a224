#!/usr/bin/env bash
# test/bench_multinode.sh — allreduce bandwidth across the namespace link (not part of make test):
# two ranks on two namespace nodes (test/multinode/nodes.sh: a veth pair and a bridge inside
# this machine, so the "link" is the kernel's TCP path, not a wire) talk through Gloo; beside them
# the same two ranks on one node through shared memory. Each row of each table: the best of 5
# timed loops (test/bench_comm_net.c), nccl-tests' algbw / busbw. Needs root (namespaces);
# prints the reason and exits 0 otherwise, as a benchmark is no test.
# Usage: test/bench_multinode.sh [max_bytes=16M]
set -euo pipefail
cd "$(dirname "$0")/.."
MAX="${1:-16M}"
make --no-print-directory build/test/bench_comm_net >/dev/null
TMP=$(mktemp -d /tmp/mtrain-bench-multinode.XXXXXX)
cleanup() { rm -rf "$TMP"; }
source test/multinode/nodes.sh
mn_skip() { echo "bench_multinode: skipped: $*"; exit 0; }
mn_up 2
export MT_STORE_SECRET
MT_STORE_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
bench() { # bench NAME NODE_OF_RANK0 NODE_OF_RANK1
  local port=$((20000 + RANDOM % 20000)) pids=() r nodes=("$2" "$3") local_size=2
  [ "$2" != "$3" ] && local_size=1
  echo "== $1"
  for r in 0 1; do
    local lr=$r; [ $local_size = 1 ] && lr=0
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$lr LOCAL_WORLD_SIZE=$local_size MASTER_ADDR=$(mn_addr 0) MASTER_PORT=$port \
      mn_exec "${nodes[$r]}" timeout 300 build/test/bench_comm_net "$MAX" >"$TMP/r$r.log" 2>&1 &
    pids+=($!)
  done
  for r in 0 1; do wait "${pids[$r]}" || { cat "$TMP/r$r.log"; echo "bench_multinode: rank $r failed"; exit 1; }; done
  cat "$TMP/r0.log"
}
bench "2 ranks on 2 nodes (Gloo over the namespace link)" 0 1
bench "2 ranks on 1 node (shared memory)" 0 0
