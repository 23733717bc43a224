# Acceptance: Slurm across two nodes. The nodes are namespaces of this machine
# (test/multinode/nodes.sh; skipped with the reason where they cannot be made, as not root);
# slurmctld in node 0, a slurmd in each node (test/multinode/slurm.sh). 2 nodes x 2 ranks,
# bootstrapped by Slurm's PMIx server, against the serial run:
#   srun -N 2 --ntasks-per-node 2 --mpi=pmix mtrain ... with tp=2 inside a node and dp=2 across
#     (Gloo) under the distributed optimizer, and with tp=2 x pp=2 (the pipeline across the nodes);
#   sbatch -W scripts/slurm/mtrain.sbatch (the shipped script, sized by command-line options), tp=2 x dp=2
# Tolerance as multinode_launch.sh: 1e-4 relative on losses, 1e-3 on grad norms.
source test/e2e_lib.sh
source test/multinode/nodes.sh
source test/multinode/slurm.sh
need_data
mn_up 2
mn_slurm_up "$TMP/slurm"
ITERS=4
BASE=(--train-iters $ITERS --micro-batch-size 2 --set logging.interval=1 --set logging.eval_interval=0)
serial ref --config configs/gpt-tiny.yaml
srun_run() { # srun_run NAME PARALLEL_FLAGS...: one srun across the 2 nodes against the serial run
  local name=$1; shift
  mn_exec 0 timeout 120 srun -N 2 --ntasks-per-node 2 --mpi=pmix "$MTRAIN" --config configs/gpt-tiny.yaml \
    "${BASE[@]}" "$@" --metrics "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 ||
    { tail -n 30 "$TMP/$name.log"; fail "srun across 2 nodes ($name) failed"; }
  compare "$TMP/ref.jsonl" "$TMP/$name.jsonl" "srun -N 2 --ntasks-per-node 2 --mpi=pmix, $name" $ITERS 1e-4 1e-3
}
srun_run tp2-dp2-distopt --tensor-model-parallel-size 2 --use-distributed-optimizer
srun_run tp2-pp2 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
mn_exec 0 timeout 120 sbatch -W --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0 \
  --output="$TMP/sbatch.out" scripts/slurm/mtrain.sbatch configs/gpt-tiny.yaml "${BASE[@]}" \
  --tensor-model-parallel-size 2 --metrics "$TMP/sbatch.jsonl" >"$TMP/sbatch.log" 2>&1 ||
  { cat "$TMP/sbatch.log"; tail -n 30 "$TMP/sbatch.out"; fail "sbatch across 2 nodes failed"; }
compare "$TMP/ref.jsonl" "$TMP/sbatch.jsonl" "sbatch scripts/slurm/mtrain.sbatch (2 nodes x 2)" $ITERS 1e-4 1e-3
mn_check_shm_empty
echo "PASS: srun and sbatch across 2 nodes reproduce the serial run"
