# Acceptance: a node's link down. Nodes as in multinode_launch.sh (namespaces of this machine;
# skipped where they cannot be made). 2 nodes x 2 ranks, tp=2 inside a node, dp=2 across (Gloo),
# parallel.timeout_s = 8:
#   a 2 s outage (shorter than the timeout): TCP retransmits once the link is back, and the run
#   goes on to its last iteration, exit 0 on both nodes (10 iterations: every one all-reduces across
#   the link, so the run cannot end during the outage, which starts at its first iteration; that it
#   had not ended when the link came back is checked);
#   an outage longer than the timeout: every rank fails naming the other node (node 0's name
#   mtnode1, node 1's mtnode0), both launchers exit non-zero within timeout_s + 15 s, no hang.
source test/e2e_lib.sh
source test/multinode/nodes.sh
need_data
mn_up 2
TMO=8
ARGS=(--config configs/gpt-tiny.yaml --micro-batch-size 2 --set logging.interval=1 --set logging.eval_interval=0
  --tensor-model-parallel-size 2 --set parallel.timeout_s=$TMO)
port=$((20000 + RANDOM % 20000))
# short: 10 iterations (~0.3 s each here), the link down for 2 s once training runs
mn_launch_all blip $port 2 "${ARGS[@]}" --train-iters 10 &
all=$!
wait_iter "$TMP/blip.node0.log"
mn_link 1 down; sleep 2; mn_link 1 up
! grep -q "finished 10 iterations" "$TMP/blip.node0.log" || fail "the run ended before the link came back: the outage did not hit training"
wait $all || { tail -n 12 "$TMP"/blip.node*.log; fail "a 2 s link outage (timeout_s $TMO) ended the run"; }
grep -q "finished 10 iterations" "$TMP/blip.node0.log" || fail "the run did not finish its 10 iterations"
echo "a 2 s outage: the run went on and finished its 10 iterations"
# long: the link stays down
mn_launch_all cut $((port + 1)) 2 "${ARGS[@]}" --train-iters 100000 &
all=$!
wait_iter "$TMP/cut.node0.log"
t0=$(date +%s)
mn_link 1 down
wait $all && fail "the launchers exited 0 with node 1's link down"
dt=$(($(date +%s) - t0))
echo "link down: both launchers ended after $dt s"
[ $dt -le $((TMO + 15)) ] || fail "took $dt s to end (timeout_s $TMO)"
# a rank's error line starts with its tag [rR ...]; a rank whose node-local peer met the lost node first
# reports that peer's error ("rank 1 (pid P) aborted: rank 1: allreduce: lost node mtnode1 ...")
for r in 0 1; do grep -qE "^\[r$r .*mtnode1" "$TMP/cut.node0.log" || { tail -n 8 "$TMP/cut.node0.log"; fail "rank $r did not name mtnode1"; }; done
for r in 2 3; do grep -qE "^\[r$r .*mtnode0" "$TMP/cut.node1.log" || { tail -n 8 "$TMP/cut.node1.log"; fail "rank $r did not name mtnode0"; }; done
grep -h "mtrain: error" "$TMP"/cut.node*.log | cut -c1-300
mn_check_shm_empty
echo "PASS: a short outage is ridden out; a long one is named by every rank within $dt s"
