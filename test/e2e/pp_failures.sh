# Acceptance: a dead or stuck pipeline stage ends the job. pp=2 x dp=2 on 4
# ranks (ranks 2 and 3 hold stage 1): rank 2 is killed (kill -9) or stopped (SIGSTOP) while
# activations and gradients cross the stages; every other rank exits non-zero naming rank 2
# (its pipeline peer rank 0 in a send/recv, its dp peer rank 3 in the gradient allreduce, rank 1
# through both), `mtrain launch` returns non-zero within 30 s, no process and no /dev/shm segment
# is left. The same pattern as dp_failures.sh.
# The survivors of the stopped rank time out on their own (parallel.timeout_s = 5) and exit within
# ~0.1 s of each other; the launcher then waits MT_LAUNCH_PEER_GRACE_S before it SIGTERMs what is
# left (the stopped rank itself): 2 s here instead of the default 10 s, still 10x more than the
# survivors need to report; the checks are unchanged. The sigstop case ends ~8 s sooner.
source test/e2e_lib.sh
need_data
export MT_LAUNCH_PEER_GRACE_S=2
shm_before=$(shm_segments)
ARGS=(--config configs/gpt-tiny.yaml --train-iters 100000 --micro-batch-size 2 --set logging.interval=1
      --set logging.eval_interval=0 --pipeline-model-parallel-size 2)

pp2() { grep -q "pp 2" "$2" || { cat "$2"; fail "$1: not a pp=2 run"; }; } # pp2 NAME LOG: a pp=2 run
run_case kill9 KILL 300 "rank 2 .*died" pp2
run_case sigstop STOP 5 "rank 2" pp2
shm_after=$(shm_segments)
[ "$shm_after" -le "$shm_before" ] || { ls -la /dev/shm; fail "segments left in /dev/shm"; }
echo "no segments left in /dev/shm"
