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
# Then the same with node 1 killed in the middle of a save: saving every iteration (a save of this
# tiny model takes longer than an iteration, so most of the time one is being written), node 1 dies
# while an iter_N.tmp/ folder exists. That save never completes: latest_checkpointed_iteration.txt
# still names a complete folder, the restart resumes from it, and the final loss is again the
# uninterrupted run's. The kill must land inside a save (the .tmp folder is still there right
# after it), or the case says it missed and fails: it would not test what it claims.
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
node_launch() { # node_launch I LOG CKPT_DIR ARGS...: this node's launcher, in the background
  local i=$1 log=$2 ck=$3; shift 3
  mn_exec "$i" timeout 180 "$MTRAIN" launch -n 2 --nnodes 2 --node-rank "$i" --master-addr "$(mn_addr 0)" \
    --master-port $port --max-restarts 1 -- "${ARGS[@]}" --save "$ck" --metrics "$ck.jsonl" "$@" >"$log" 2>&1 &
}
# lose_node NAME SAVE_INTERVAL READY: both nodes train; once the test READY (a shell condition)
# holds, node 1 dies; it is replaced and relaunched with --load; the job must finish as the
# uninterrupted run did
lose_node() {
  local name=$1 every=$2 ready=$3 ck="$TMP/$1" l0 l1 rc0=0 rc1=0 got
  port=$((port + 1))
  node_launch 0 "$ck.n0.log" "$ck" --save-interval "$every"; l0=$!
  node_launch 1 "$ck.n1.log" "$ck" --save-interval "$every"; l1=$!
  local t_end=$((SECONDS + 60))
  until eval "$ready" || [ $SECONDS -ge $t_end ]; do :; done # no sleep: a save lasts milliseconds
  eval "$ready" || { tail -n 20 "$ck.n0.log"; fail "$name: the run never reached the moment to kill node 1"; }
  mn_kill_node 1
  KILLED_IN=$(ls -d "$ck"/*.tmp 2>/dev/null | head -n 1)
  wait $l1 2>/dev/null
  mn_node_up 1
  node_launch 1 "$ck.n1b.log" "$ck" --save-interval "$every" --load "$ck"; l1=$!
  wait $l0 || rc0=$?
  wait $l1 || rc1=$?
  [ $rc0 = 0 ] && [ $rc1 = 0 ] || { tail -n 15 "$ck.n0.log" "$ck.n1b.log"; fail "$name: after the restart node 0 exited $rc0, node 1 $rc1"; }
  grep -q "restarting all 2 ranks (restart 1 of 1)" "$ck.n0.log" || { tail -n 20 "$ck.n0.log"; fail "$name: node 0 did not restart its ranks"; }
  grep -q "loaded checkpoint" "$ck.n0.log" || fail "$name: node 0's restarted ranks did not load a save"
  got=$(final "$ck.jsonl")
  echo "$name: uninterrupted: $want; node 1 killed, replaced and the job restarted: $got"
  [ "$got" = "$want" ] || fail "$name: the restarted job's final loss differs from the uninterrupted run's"
}
lose_node mid-iteration 4 '[ -f "$ck/latest_checkpointed_iteration.txt" ] && grep -q "iteration        6/" "$ck.n0.log" && sleep 0.02'
lose_node mid-save 1 '[ -f "$ck/latest_checkpointed_iteration.txt" ] && compgen -G "$ck/*.tmp" >/dev/null'
[ -n "$KILLED_IN" ] || fail "mid-save: no save was being written when node 1 died (the kill missed the save)"
echo "mid-save: node 1 died while ${KILLED_IN##*/} was being written"
mn_check_shm_empty
echo "PASS: a node lost mid-iteration or mid-save, a replacement and --max-restarts 1 finish with the uninterrupted run's final loss"
