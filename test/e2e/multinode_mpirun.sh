# Acceptance: OpenMPI's mpirun across two nodes. The nodes are namespaces of this machine
# (test/multinode/nodes.sh; skipped with the reason where they cannot be made). mpirun runs in
# node 0 with a hostfile of mtnode0 and mtnode1 (2 slots each); its remote-launch agent
# (mn_mpirun_agent) starts the orted inside node 1, as ssh would on another machine; the ranks
# bootstrap through OpenMPI's PMIx. 2 nodes x 2 ranks against the serial run, as
# multinode_launch.sh does under `mtrain launch`:
#   tp=2 inside a node, dp=2 across (Gloo), with the distributed optimizer (its reduce-scatter and
#   all-gather cross the nodes);
#   tp=2 x pp=2: the pipeline's sends and receives cross the nodes.
# Tolerance multinode_launch.sh's: 1e-4 relative on losses, 1e-3 on grad norms.
source test/e2e_lib.sh
source test/multinode/nodes.sh
need_data
command -v mpirun >/dev/null || fail "mpirun missing: scripts/install-deps.sh installs openmpi-bin"
mn_up 2
mn_mpirun_agent "$TMP/agent"
printf 'mtnode0 slots=2\nmtnode1 slots=2\n' >"$TMP/hostfile"
ITERS=4
BASE=(--config configs/gpt-tiny.yaml --train-iters $ITERS --micro-batch-size 2 --set logging.interval=1
  --set logging.eval_interval=0)
MPIRUN=(mpirun --allow-run-as-root --hostfile "$TMP/hostfile" --mca plm_rsh_agent "$TMP/agent"
  --mca oob_tcp_if_include eth0 --mca btl_tcp_if_include eth0 -n 4)
# the placement first: two ranks on each node
got=$(mn_exec 0 timeout 60 "${MPIRUN[@]}" hostname 2>&1 | sort | uniq -c | awk '{print $2 "x" $1}' | tr '\n' ' ')
[ "$got" = "mtnode0x2 mtnode1x2 " ] || fail "mpirun placed the ranks on: $got (expected 2 on each node)"
serial ref
case_run() { # case_run NAME EXPECTED_LAYOUT PARALLEL_FLAGS...: one mpirun -n 4 against the serial run
  local name=$1 layout=$2; shift 2
  mn_exec 0 timeout 120 "${MPIRUN[@]}" "$MTRAIN" "${BASE[@]}" "$@" --metrics "$TMP/$name.jsonl" \
    >"$TMP/$name.log" 2>&1 || { tail -n 30 "$TMP/$name.log"; fail "mpirun across 2 nodes ($name) failed"; }
  grep -q "4 ranks ($layout" "$TMP/$name.log" || { tail -n 20 "$TMP/$name.log"; fail "mpirun $name: not 4 ranks at $layout"; }
  compare "$TMP/ref.jsonl" "$TMP/$name.jsonl" "mpirun -n 4 across 2 nodes, $name" $ITERS 1e-4 1e-3
}
case_run tp2-dp2-distopt "tp 2, dp 2" --tensor-model-parallel-size 2 --use-distributed-optimizer
case_run tp2-pp2 "tp 2, pp 2" --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
mn_check_shm_empty
echo "PASS: mpirun across 2 nodes reproduces the serial run"
