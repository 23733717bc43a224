# Acceptance: a node lost mid-iteration (every process of node 1 killed at once: its launcher and
# its ranks, as when a machine dies) is detected and named by every survivor within
# parallel.timeout_s, and no node's /dev/shm keeps anything. Nodes as in multinode_launch.sh
# (namespaces of this machine; skipped with the reason where they cannot be made).
# 2 nodes x 2 ranks, tp=2 inside a node, dp=2 across the nodes (Gloo). The survivors on node 0
# are each in a dp all-reduce with a rank of node 1: both must fail naming "mtnode1", and node 0's
# launcher must exit non-zero, within timeout_s (10 s) plus the launcher's own grace. Whichever
# survivor notices second may be in a tp collective with the first (shared memory) rather than in
# its own dp all-reduce: the first one's abort carries its cause, so each survivor's own error line
# names mtnode1 either way, and so does the launcher's line about the failed rank.
source test/e2e_lib.sh
source test/multinode/nodes.sh
need_data
mn_up 2
TMO=10
ARGS=(--config configs/gpt-tiny.yaml --train-iters 100000 --micro-batch-size 2 --set logging.interval=1
  --set logging.eval_interval=0 --tensor-model-parallel-size 2 --set parallel.timeout_s=$TMO)
port=$((20000 + RANDOM % 20000))
mn_launch_all lost $port 2 "${ARGS[@]}" &
all=$!
wait_iter "$TMP/lost.node0.log"
sleep 1
# the tp groups (inside a node) run over shared memory, the dp groups (across) over Gloo: node 0's
# ranks map mtrain segments (unlinked, so "(deleted)") and hold TCP connections
n_maps=$(mn_exec 0 sh -c 'cat /proc/[0-9]*/maps 2>/dev/null' | grep -c '/dev/shm/mtrain-' || true)
[ "$n_maps" -gt 0 ] || fail "node 0's ranks map no shared-memory segment: the node-local tp group is not on shared memory"
n_tcp=$(mn_exec 0 sh -c 'cat /proc/net/tcp' | awk '$4 == "01"' | wc -l)
[ "$n_tcp" -gt 0 ] || fail "node 0 holds no established TCP connection: dp is not over the network"
echo "node 0: $n_maps shared-memory mappings, $n_tcp established TCP connections"
t0=$(date +%s)
mn_kill_node 1
wait $all && fail "node 0's launcher exited 0 after node 1 was lost"
dt=$(($(date +%s) - t0))
log="$TMP/lost.node0.log"
echo "node 0's launcher ended $dt s after node 1 was killed; its log ends:"
tail -n 12 "$log"
[ $dt -le $((TMO + 15)) ] || fail "node 0 took $dt s to notice (timeout_s $TMO)"
for r in 0 1; do # the rank's own error line (its "[rR tp.. ]" prefix), not another's naming it
  grep -q "^\[r$r[] ].*error:.*lost node mtnode1" "$log" || fail "rank $r did not name the lost node mtnode1"
done
grep -q "^mtrain launch: rank [01] .*lost node mtnode1" "$log" ||
  fail "node 0's launcher did not name the lost node mtnode1 in its line about the failed rank"
mn_check_shm_empty
echo "PASS: both survivors named mtnode1 within $dt s; node 0's /dev/shm is empty"
