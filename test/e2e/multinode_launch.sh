# Acceptance: training across two nodes reproduces the serial run. The nodes are namespaces of
# this machine (test/multinode/nodes.sh: own network, hostname, IPC and /dev/shm each, joined by a
# bridge); skipped with the reason where they cannot be made (not root, no namespaces). Each node
# runs `mtrain launch -n 2 --nnodes 2 --node-rank R --master-addr <node 0>`; 4 ranks:
#   tp=2 x dp=2: tp inside a node (shared memory), dp across the nodes (Gloo over TCP);
#   tp=2 x pp=2: the pipeline's sends and receives across the nodes;
#   tp=2 x dp=2 with the distributed optimizer: reduce-scatter and all-gather across the nodes.
# Same recipe and global batch as the serial run; the runs differ only in the order of fp32 sums
# (Gloo's ring order for dp, tp's partial products), so the tolerance is tp_equivalence.sh's:
# 1e-4 relative on every loss, 1e-3 on grad norms. Afterwards no node's /dev/shm holds anything.
source test/e2e_lib.sh
source test/multinode/nodes.sh
need_data
mn_up 2
ITERS=4
BASE=(--config configs/gpt-tiny.yaml --train-iters $ITERS --micro-batch-size 2 --set logging.interval=1
  --set logging.eval_interval=0)
serial ref
port=$((20000 + RANDOM % 20000))
case_run() { # case_run NAME PARALLEL_FLAGS...
  local name=$1; shift
  port=$((port + 1))
  mn_launch_all "$name" $port 2 "${BASE[@]}" "$@" ||
    { tail -n 20 "$TMP/$name".node*.log; fail "$name: a node's launcher failed"; }
  compare "$TMP/ref.jsonl" "$TMP/$name.jsonl" "$name (2 nodes x 2 ranks)" $ITERS 1e-4 1e-3
}
case_run "tp2 dp2" --tensor-model-parallel-size 2
case_run "tp2 pp2" --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
case_run "tp2 dp2 distopt" --tensor-model-parallel-size 2 --use-distributed-optimizer
mn_check_shm_empty
echo "PASS: 2 nodes x 2 ranks (mtrain launch --nnodes 2) reproduce the serial run; /dev/shm empty on both nodes"
