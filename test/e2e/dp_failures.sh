# Acceptance: a rank that dies (kill -9) or hangs (SIGSTOP) mid-run ends the job:
# every other rank exits non-zero naming the dead / stuck rank, `mtrain launch` returns
# non-zero within 30 s, no process is left, and nothing is left in /dev/shm.
source test/e2e_lib.sh
need_data
shm_before=$(shm_segments)
ARGS=(--config configs/gpt-tiny.yaml --train-iters 100000 --micro-batch-size 2 --set logging.interval=1 --set logging.eval_interval=0)
run_case kill9 KILL 300 "rank 2 .*died"
run_case sigstop STOP 5 "rank 2"
shm_after=$(shm_segments)
[ "$shm_after" -le "$shm_before" ] || { ls -la /dev/shm; fail "segments left in /dev/shm"; }
echo "no segments left in /dev/shm"
