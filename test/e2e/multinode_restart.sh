# Acceptance: a node lost and the job restarted. Nodes as in multinode_launch.sh (namespaces of
# this machine; skipped where they cannot be made). 2 nodes x 2 ranks (tp=2 inside, dp=2 across)
# under `mtrain launch --nnodes 2 --max-restarts 1`, saving every 4 iterations into one folder
# both nodes see. Once the save at 4 exists and training is past it, every process of node 1 is
# killed (the machine dies); node 0's launcher restarts its ranks (restart 1), which resume from
# the latest save in checkpoint.dir and wait at the env:// store for the other node. Node 1 is
# replaced (a new node of the same name and address) and its launcher started again with
# --load of that folder. The job then finishes with exit 0 on both nodes and the same final loss
# as an uninterrupted run: iteration 12's lm_loss and grad_norm strings (%.9g) are equal (the
# resume is exact on the same layout).
source test/e2e_lib.sh
source test/multinode/nodes.sh
need_data
mn_up 2
ITERS=12
ARGS=(--config configs/gpt-tiny.yaml --train-iters $ITERS --micro-batch-size 2 --set logging.interval=1
  --set logging.eval_interval=0 --tensor-model-parallel-size 2 --set parallel.timeout_s=30)
port=$((20000 + RANDOM % 20000))
# the last iteration's metrics: lm_loss and grad_norm as written (%.9g: the bits)
final() { grep -o "\"iteration\":$ITERS,\"consumed_samples\":[0-9]*,\"lm_loss\":[^,]*,\"lr\":[^,]*,\"grad_norm\":[^,]*" "$1" | tail -n 1; }
mn_launch_all straight $port 2 "${ARGS[@]}" || { tail -n 20 "$TMP"/straight.node*.log; fail "uninterrupted run failed"; }
want=$(final "$TMP/straight.jsonl")
[ -n "$want" ] || fail "the uninterrupted run printed no final loss"
port=$((port + 1))
node_launch() { # node_launch I LOG ARGS...: this node's launcher, in the background
  local i=$1 log=$2; shift 2
  mn_exec "$i" timeout 180 "$MTRAIN" launch -n 2 --nnodes 2 --node-rank "$i" --master-addr "$(mn_addr 0)" \
    --master-port $port --max-restarts 1 -- "${ARGS[@]}" --save "$TMP/ck" --save-interval 4 --metrics "$TMP/restart.jsonl" "$@" >"$log" 2>&1 &
}
node_launch 0 "$TMP/n0.log"; l0=$!
node_launch 1 "$TMP/n1.log"; l1=$!
for _ in $(seq 1 900); do
  [ -f "$TMP/ck/latest_checkpointed_iteration.txt" ] && grep -q "iteration        6/" "$TMP/n0.log" && break
  sleep 0.05
done
grep -q "iteration        6/" "$TMP/n0.log" || { tail -n 20 "$TMP/n0.log"; fail "the run did not reach iteration 6"; }
mn_kill_node 1
wait $l1 2>/dev/null
mn_node_up 1
node_launch 1 "$TMP/n1b.log" --load "$TMP/ck"; l1=$!
rc0=0; rc1=0
wait $l0 || rc0=$?
wait $l1 || rc1=$?
[ $rc0 = 0 ] && [ $rc1 = 0 ] || { tail -n 15 "$TMP/n0.log" "$TMP/n1b.log"; fail "after the restart: node 0 exited $rc0, node 1 $rc1"; }
grep -q "restarting all 2 ranks (restart 1 of 1)" "$TMP/n0.log" || { tail -n 20 "$TMP/n0.log"; fail "node 0 did not restart its ranks"; }
grep -q "loaded checkpoint" "$TMP/n0.log" || fail "node 0's restarted ranks did not load a save"
got=$(final "$TMP/restart.jsonl")
echo "uninterrupted: $want; node 1 killed, replaced and the job restarted: $got"
[ "$got" = "$want" ] || fail "the restarted job's final loss differs from the uninterrupted run's"
mn_check_shm_empty
echo "PASS: a lost node, a replacement and --max-restarts 1 finish with the uninterrupted run's final loss"
