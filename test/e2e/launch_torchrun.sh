#!/usr/bin/env bash
# test/e2e/launch_torchrun.sh — `mtrain launch` with torchrun's flags:
#   (a) --nproc_per_node 2 -- ARGS and --nproc-per-node=2 ARGS train dp 2 and give the serial run's
#       losses and grad norms (same global batch; 1e-4 relative, as dp_equivalence.sh);
#   (b) two launchers, --nnodes 2 --node_rank 0|1 --nproc_per_node 2, node 0 with --master_addr /
#       --master_port, node 1 with --rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id: one
#       4-rank dp 4 job (env://; both "nodes" are this machine, so the shared-memory communicator
#       carries it) whose losses equal the serial run's, the ranks named by their global rank;
#   (c) SIGKILL of node 1's launcher mid-training: node 0's launcher exits non-zero within 30 s, its
#       ranks name a lost rank of node 1 ("rank 2|3 (pid P) died"), no process, /dev/shm segment or
#       temporary file is left (test/faults_lib.sh's checks);
#   (d) bad values get exit 2 and a message naming the flag: --nnodes 0, --node_rank 2 --nnodes 2,
#       --nnodes 1:4 (elastic), an unknown launcher flag before `--` (lists the known ones),
#       --rdzv-backend etcd.
# Tiny runs (2 layers, hidden 64, seq 64, --threads 1): about 15 s on 2 cores.
source test/e2e_lib.sh
source test/faults_lib.sh
need_data
# a private copy: a concurrent `make` relinking ./mtrain must not pull the binary from under the ranks
cp "$MTRAIN" "$TMP/mtrain" && MTRAIN="$TMP/mtrain"
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT MT_BOOTSTRAP MT_STORE_PORT GROUP_RANK
for v in $(env | grep -oE '^PMIX_[A-Z0-9_]+' | grep -v '^PMIX_MCA_'); do unset "$v"; done
export OMP_NUM_THREADS=1
ARGS=(--config configs/gpt-tiny.yaml --num-layers 2 --hidden-size 64 --seq-length 64 --micro-batch-size 2
      --global-batch-size 8 --threads 1 --set logging.interval=1 --set logging.eval_interval=0
      --set parallel.timeout_s=30)
BASE=(--train-iters 6)
ITERS=6
free_port() { echo $(( 20000 + RANDOM % 20000 )); }
dp_of() { grep -q "dp $2" "$1" || { tail -n 20 "$1"; fail "$3: did not run with dp $2"; }; }

serial ref "${ARGS[@]}"

# ---- (a) one node, both spellings ----
"$MTRAIN" launch --nproc_per_node 2 -- "${ARGS[@]}" "${BASE[@]}" --metrics "$TMP/a1.jsonl" >"$TMP/a1.log" 2>&1 ||
  { cat "$TMP/a1.log"; fail "(a) --nproc_per_node 2 run failed"; }
dp_of "$TMP/a1.log" 2 "(a) --nproc_per_node 2"
compare "$TMP/ref.jsonl" "$TMP/a1.jsonl" "(a) --nproc_per_node 2 --" $ITERS 1e-4 1e-4
"$MTRAIN" launch --nproc-per-node=2 "${ARGS[@]}" "${BASE[@]}" --metrics "$TMP/a2.jsonl" >"$TMP/a2.log" 2>&1 ||
  { cat "$TMP/a2.log"; fail "(a) --nproc-per-node=2 run failed"; }
dp_of "$TMP/a2.log" 2 "(a) --nproc-per-node=2"
compare "$TMP/ref.jsonl" "$TMP/a2.jsonl" "(a) --nproc-per-node=2" $ITERS 1e-4 1e-4

# ---- (b) two launchers, one 4-rank job ----
port=$(free_port)
timeout 120 "$MTRAIN" launch --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --rdzv-id job13 --nnodes 2 \
  --node-rank 1 --nproc-per-node 2 -- "${ARGS[@]}" "${BASE[@]}" >"$TMP/b1.log" 2>&1 &
node1=$!
timeout 120 "$MTRAIN" launch --nnodes 2 --node_rank 0 --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port" \
  -- "${ARGS[@]}" "${BASE[@]}" --metrics "$TMP/b.jsonl" >"$TMP/b0.log" 2>&1 || { cat "$TMP/b0.log" "$TMP/b1.log"; fail "(b) node 0 failed"; }
wait $node1 || { cat "$TMP/b0.log" "$TMP/b1.log"; fail "(b) node 1 failed"; }
dp_of "$TMP/b0.log" 4 "(b) --nnodes 2"
grep -q "node 1 of 2: ranks 2..3 of 4, env:// rendezvous at 127.0.0.1:$port" "$TMP/b1.log" ||
  { cat "$TMP/b1.log"; fail "(b) node 1 did not start ranks 2..3 of 4"; }
compare "$TMP/ref.jsonl" "$TMP/b.jsonl" "(b) --nnodes 2 x --nproc_per_node 2" $ITERS 1e-4 1e-4

# ---- (c) one launcher killed: the other ends, naming the lost rank ----
names_lost_rank() { grep -qE "rank [23] \(pid [0-9]+\) died" "$TMP/$CASE.log" || { tail -n 20 "$TMP/$CASE.log"; return 1; }; }
fault_begin kill_node1
port=$(free_port)
MT_E2E_MARK="$CASE_MARK" TMPDIR="$CASE_TMPDIR" "$MTRAIN" launch --nnodes 2 --node_rank 1 --nproc_per_node 2 \
  --master_addr 127.0.0.1 --master_port "$port" -- "${ARGS[@]}" --train-iters 100000 >"$TMP/c1.log" 2>&1 </dev/null &
node1=$!
fault_start "$MTRAIN" launch --nnodes 2 --node_rank 0 --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port" \
  -- "${ARGS[@]}" --train-iters 100000
wait_iter "$TMP/$CASE.log"
kill -KILL $node1
wait $node1 2>/dev/null
fault_wait 30
fault_end nonzero "(node 0, local rank" names_lost_rank

# ---- (d) bad values ----
bad() { # bad "FLAGS" TEXT: exit 2 and TEXT on stderr
  local rc=0
  # shellcheck disable=SC2086
  "$MTRAIN" launch --nproc_per_node 2 $1 -- bootstrap-check >/dev/null 2>"$TMP/d.err" || rc=$?
  [ $rc -eq 2 ] && grep -qF -- "$2" "$TMP/d.err" || fail "(d) '$1': exit $rc, $(cat "$TMP/d.err")"
  echo "ok  (d) '$1': $(head -c 160 "$TMP/d.err")"
}
bad "--nnodes 0" "--nnodes 0: expected a number of nodes"
bad "--node_rank 2 --nnodes 2" "--node-rank 2: expected 0..1 (--nnodes 2)"
bad "--nnodes 1:4" "--nnodes 1:4: elastic MIN:MAX node counts are not supported"
bad "--nnode 2" "unknown launcher flag '--nnode'; known: -n/--nproc-per-node, --nnodes"
bad "--rdzv-backend etcd" "--rdzv-backend etcd: mtrain launch has a static rendezvous only"
echo "launch_torchrun: all cases passed"
