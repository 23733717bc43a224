# Acceptance (timers): Megatron's --timing-log-level / --timing-log-option.
#   A. tp=2 x pp=2 with sequence parallelism, --timing-log-level 2, 4 iterations logged every 2:
#      after each iteration line the block '(min, max) time across ranks (ms):' with one line
#      '    NAME ....: (MIN, MAX)' per timer, holding every timer this layout runs (forward-backward,
#      forward-compute, backward-compute, batch-generator, the pipeline transfer groups,
#      tp-collectives, layernorm- and embedding-grads-all-reduce, grad-norm-loss-all-reduce,
#      optimizer), MIN <= MAX on every line, and a straggler line naming a rank of the job.
#   B. the same with --timing-log-level 0 (Megatron's default): no block, no straggler line; and the
#      metrics' lm_loss and grad_norm (%.9g) of every iteration equal A's exactly: timers only read
#      clocks (and wait for the device), they never touch the numbers.
#   C. dp=2 with the distributed optimizer, level 2: grads-reduce-scatter and params-all-gather.
#   D. dp=2, level 1 with --timing-log-option max: 'max time across ranks (ms):', all-grads-sync, and no
#      level-2 timer (forward-compute).
#   E. level 3 (mtrain's op timers) on a serial run, m = 4 micro-batches of gpt-tiny (4 layers): the
#      six op-class timers in the block; the end-of-run op table whose per-iteration call counts follow
#      from the model (per micro-batch, each layer's QKV, projection and MLP-down GEMM plus the output
#      layer: matmul_fwd 4 (3 L + 1) = 52, one fused GeLU GEMM per layer: 16; one attention forward per
#      layer: 16); in every log record of the metrics the op classes add up to no more than the step
#      (the interval's mean ms_per_iter, 1% for the clock reads around each op), and gemm-ops to no
#      more than forward-backward; the losses equal a level-0 run's exactly.
# Also prints the cost of level 2 against level 0: ms/iteration of serial runs, interleaved
# (informational: on a shared 2-core machine the noise is larger than the cost).
source test/e2e_lib.sh
need_data
BASE=(--config configs/gpt-tiny.yaml --data-path "$DATA" --micro-batch-size 1 --global-batch-size 4 --seq-length 64
      --log-interval 2 --set logging.eval_interval=0)
run() { # run NAME RANKS ARGS...
  local name=$1 n=$2; shift 2
  "$MTRAIN" launch -n "$n" -- "${BASE[@]}" --metrics "$TMP/$name.jsonl" "$@" >"$TMP/$name.log" 2>&1 \
    || { tail -n 30 "$TMP/$name.log"; fail "run $name failed"; }
}
# names NAME: the timer names of the blocks in NAME's log
names() { sed -n 's/^\(\[r[0-9]*\] \)\? \{4\}\([a-z-]*\) \.*: .*/\2/p' "$TMP/$1.log" | sort -u; }
expect() { # expect NAME TIMER...: every TIMER appears in NAME's blocks
  local name=$1 t; shift
  for t in "$@"; do names "$name" | grep -qx -- "$t" || { cat "$TMP/$name.log"; fail "$name: no timer '$t'"; }; done
}
TPPP=(--train-iters 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel)
run A 4 "${TPPP[@]}" --timing-log-level 2
[ "$(grep -c '(min, max) time across ranks (ms):' "$TMP/A.log")" -eq 3 ] \
  || { cat "$TMP/A.log"; fail "A: expected a block after each of the 3 log lines (iterations 1, 2, 4)"; }
expect A forward-backward forward-compute backward-compute batch-generator forward-recv backward-send \
  forward-send-backward-recv backward-send-forward-recv tp-collectives layernorm-grads-all-reduce \
  embedding-grads-all-reduce grad-norm-loss-all-reduce optimizer
echo "A: timers: $(names A | tr '\n' ' ')"
bad=$(sed -n 's/.* \.*: (\([0-9.]*\), \([0-9.]*\))$/\1 \2/p' "$TMP/A.log" | awk '$1 > $2' | wc -l)
n=$(sed -n 's/.* \.*: (\([0-9.]*\), \([0-9.]*\))$/\1 \2/p' "$TMP/A.log" | wc -l)
[ "$n" -gt 30 ] && [ "$bad" -eq 0 ] || fail "A: $bad of $n timer lines have min > max"
s=$(grep -m1 "straggler: rank [0-3] forward-backward [0-9.]* ms vs fastest [0-9.]* ms (rank [0-3], +[0-9]*%)" "$TMP/A.log") \
  || { cat "$TMP/A.log"; fail "A: no straggler line naming a rank"; }
echo "A: ${s#*] }"
run B 4 "${TPPP[@]}" --timing-log-level 0
! grep -q "time across ranks\|straggler" "$TMP/B.log" || fail "B: level 0 printed timers"
for k in lm_loss grad_norm; do
  [ "$(json_field "$TMP/A.jsonl" $k | wc -l)" -eq 4 ] || fail "A: expected 4 $k values (one per iteration)"
  cmp -s <(json_field "$TMP/A.jsonl" $k) <(json_field "$TMP/B.jsonl" $k) \
    || { paste <(json_field "$TMP/A.jsonl" $k) <(json_field "$TMP/B.jsonl" $k); fail "$k differs with timers on"; }
done
echo "A vs B: lm_loss and grad_norm identical with --timing-log-level 2 and 0"
run C 2 --train-iters 2 --use-distributed-optimizer --timing-log-level 2
expect C forward-backward forward-compute grads-reduce-scatter params-all-gather optimizer
run D 2 --train-iters 2 --timing-log-level 1 --timing-log-option max
grep -q "max time across ranks (ms):" "$TMP/D.log" || { cat "$TMP/D.log"; fail "D: no 'max time across ranks' block"; }
expect D forward-backward batch-generator all-grads-sync optimizer
! names D | grep -qx forward-compute || fail "D: level 1 printed the level-2 timer forward-compute"
grep -q "^\(\[r[0-9]*\] \)\? \{4\}all-grads-sync \.*: [0-9.]*$" "$TMP/D.log" || fail "D: max lines are '    NAME ...: MAX'"
SER1=(--config configs/gpt-tiny.yaml --data-path "$DATA" --micro-batch-size 1 --global-batch-size 4 --seq-length 64
      --train-iters 4 --log-interval 2 --set logging.eval_interval=0)
"$MTRAIN" "${SER1[@]}" --timing-log-level 3 --metrics "$TMP/E.jsonl" >"$TMP/E.log" 2>&1 || { tail -n 30 "$TMP/E.log"; fail "E failed"; }
"$MTRAIN" "${SER1[@]}" --timing-log-level 0 --metrics "$TMP/F.jsonl" >"$TMP/F.log" 2>&1 || { tail -n 30 "$TMP/F.log"; fail "F failed"; }
expect E gemm-ops attention-ops norm-ops elementwise-ops optimizer-ops memory-ops forward-compute
grep -q "^op timers (rank 0, per iteration over 4 iterations; host ops):" "$TMP/E.log" || { cat "$TMP/E.log"; fail "E: no op table"; }
calls() { awk -v op="$1" '$1 == op && $2 != "" { print $3 }' "$TMP/E.log"; }
[ "$(calls matmul_fwd)" = "52.0" ] && [ "$(calls matmul_gelu_fwd)" = "16.0" ] && [ "$(calls attention_fwd)" = "16.0" ] \
  || { grep -A30 "^op timers" "$TMP/E.log"; fail "E: op calls per iteration are not the model's (52 matmul_fwd, 16 matmul_gelu_fwd, 16 attention_fwd)"; }
python3 - "$TMP/E.jsonl" <<'PY' || fail "E: op timers do not fit inside the step"
import json, sys
n = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    t = r.get("timers")
    if not t: continue
    hi = lambda k: t[k][1] if k in t else 0.0
    ops = sum(hi(k) for k in ("gemm-ops", "attention-ops", "norm-ops", "elementwise-ops", "optimizer-ops", "memory-ops"))
    assert hi("gemm-ops") > 0 and hi("gemm-ops") <= hi("forward-backward") * 1.001, t
    # one rank: the op classes are parts of its step (1% for the clock reads around each op)
    assert ops <= r["ms_per_iter_interval_avg"] * 1.01 + 0.05, (ops, r["ms_per_iter_interval_avg"], t)
    n += 1
assert n == 3, n
print("E: op classes per log record within the step (3 records)")
PY
for k in lm_loss grad_norm; do
  cmp -s <(json_field "$TMP/E.jsonl" $k) <(json_field "$TMP/F.jsonl" $k) || fail "E: $k differs with op timers on"
done
echo "E: op timers: $(grep -A2 '^op timers' "$TMP/E.log" | tail -1 | tr -s ' ')...; losses identical to level 0"
# cost of level 2: serial one-thread runs of 20 iterations, levels 0 2 0 2 0 2 interleaved; the fastest
# run of each level (the least disturbed by other load) gives the ratio
SER=(--config configs/gpt-tiny.yaml --data-path "$DATA" --micro-batch-size 1 --global-batch-size 8 --seq-length 64
     --train-iters 20 --log-interval 10 --set logging.eval_interval=0 --set training.threads=1)
for k in 1 2 3; do
  for lvl in 0 2; do
    "$MTRAIN" "${SER[@]}" --timing-log-level $lvl >"$TMP/s$lvl.log" 2>&1 || fail "serial level $lvl failed"
    echo "$lvl $(grep -o 'finished 20 iterations: [0-9.]* ms' "$TMP/s$lvl.log" | grep -o '[0-9.]* ms' | cut -d' ' -f1)"
  done
done | awk '{ if (!($1 in m) || $2 < m[$1]) m[$1] = $2; all[$1] = all[$1] " " $2 }
  END { printf "serial ms/iteration: level 0:%s; level 2:%s; fastest level 2 / fastest level 0 = %.3f\n", all[0], all[2], m[2] / m[0] }'
echo "PASS"
