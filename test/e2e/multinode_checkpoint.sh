# Acceptance: a checkpoint saved by 4 ranks on 2 nodes resumes bit for bit on 1 node x 4 ranks,
# and the reverse. Nodes as in multinode_launch.sh (namespaces of this machine, sharing the
# machine's file system as nodes share a checkpoint folder; skipped where they cannot be made).
# Layout tp=2 (inside a node) x dp=2 (across the nodes, or inside the one node), once with
# replicated optimizer state and once with the distributed optimizer (each dp rank saves and loads
# its own shard of the Adam moments, across the nodes or inside the one). A dp group of 2
# sums a + b whichever engine carries it (Gloo's ring or shared memory: one addition, which is
# commutative), so the two-node run is the one-node run bit for bit, and so is every resume:
#   straight:  2 nodes x 2 ranks, 4 iterations == 1 node x 4 ranks, 4 iterations (same strings).
#              Not so under the distributed optimizer: its grad norm sums the squared norms of
#              four shards (tp x dp), and Gloo's ring adds them in another order than shared
#              memory (the last digits of grad_norm differ from iteration 3); there the two
#              straight runs agree within multinode_launch.sh's tolerance (1e-4, 1e-3);
#   2 -> 1:    2 nodes save at iteration 2 (--exit-interval 2), 1 node x 4 resumes: iterations 3..4
#              equal the one-node straight run's, bit for bit;
#   1 -> 2:    1 node x 4 saves at 2, 2 nodes resume: iterations 3..4 equal the two-node straight
#              run's, bit for bit.
# Compared: the metrics' lm_loss and grad_norm strings (%.9g: nine digits tell any two floats apart).
source test/e2e_lib.sh
source test/multinode/nodes.sh
need_data
mn_up 2
BASE=(--config configs/gpt-tiny.yaml --train-iters 4 --micro-batch-size 2 --set logging.interval=1
  --set logging.eval_interval=0 --tensor-model-parallel-size 2)
port=$((20000 + RANDOM % 20000))
steps() { grep -o '"iteration":[0-9]*,"consumed_samples":[0-9]*,"lm_loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*' "$1" |
          awk -F'[:,]' -v from="$2" '$2 > from'; }
two() { # two NAME ARGS...: 2 nodes x 2 ranks
  local name=$1; shift
  port=$((port + 1))
  mn_launch_all "$name" $port 2 "${BASE[@]}" "$@" || { tail -n 20 "$TMP/$name".node*.log; fail "$name: a node failed"; }
}
one() { # one NAME ARGS...: 1 node x 4 ranks (node 0)
  local name=$1; shift
  mn_exec 0 timeout 120 "$MTRAIN" launch -n 4 -- "${BASE[@]}" "$@" --metrics "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 ||
    { tail -n 20 "$TMP/$name.log"; fail "$name: the one-node run failed"; }
}
same() { # same NAME WANT GOT FROM
  local want got
  want=$(steps "$2" "$4"); got=$(steps "$3" "$4")
  [ -n "$got" ] && [ "$(echo "$want" | wc -l)" = "$(echo "$got" | wc -l)" ] || fail "$1: $(echo "$got" | wc -l) iterations logged"
  [ "$want" = "$got" ] || { diff <(echo "$want") <(echo "$got") | head -n 6; fail "$1: differs from the straight run on the same nodes"; }
  echo "$1: identical to the straight run on the same nodes after iteration $4 ($(echo "$got" | tail -n 1 | cut -d, -f3))"
}
layout_case() { # layout_case NAME EXACT EXTRA_FLAGS...: straight runs, then a save on one side and a resume on the other
  local exact=$2 extra=("${@:3}")
  one straight1$1 "${extra[@]}"
  two straight2$1 "${extra[@]}"
  if [ "$exact" = 1 ]; then
    same "$1: 2 nodes x 2 ranks straight" "$TMP/straight1$1.jsonl" "$TMP/straight2$1.jsonl" 0
  else
    compare "$TMP/straight1$1.jsonl" "$TMP/straight2$1.jsonl" "$1: 2 nodes x 2 ranks straight" 4 1e-4 1e-3
  fi
  two save2$1 "${extra[@]}" --save "$TMP/ck2$1" --exit-interval 2
  [ "$(cat "$TMP/ck2$1/latest_checkpointed_iteration.txt")" = 2 ] || fail "the two-node save did not reach iteration 2"
  one resume1$1 "${extra[@]}" --load "$TMP/ck2$1"
  same "$1: saved on 2 nodes, resumed on 1 node x 4" "$TMP/straight1$1.jsonl" "$TMP/resume1$1.jsonl" 2
  one save1$1 "${extra[@]}" --save "$TMP/ck1$1" --exit-interval 2
  two resume2$1 "${extra[@]}" --load "$TMP/ck1$1"
  same "$1: saved on 1 node x 4, resumed on 2 nodes" "$TMP/straight2$1.jsonl" "$TMP/resume2$1.jsonl" 2
}
layout_case tp2-dp2 1
layout_case tp2-dp2-distopt 0 --use-distributed-optimizer
mn_check_shm_empty
echo "PASS: checkpoints move between 2 nodes x 2 ranks and 1 node x 4 ranks bit for bit"
