# Acceptance: Megatron users' log parsers read mtrain's log as it is. The iteration and
# validation lines parse with a regex written from the format strings of Megatron-LM's
# megatron/training/training.py (training_log, evaluate_and_print_results; quoted beside each
# part below), field for field, in Megatron's order and nothing after them, as printed: no rank
# prefix; mtrain's own figures follow on a line of their own ("mtrain: iteration N | ...").
# Checked on gpt-tiny (one rank):
#   (1) --log-interval 5 over 10 iterations, validation every 5, then the end-of-training
#       evaluations: lines at iterations 1, 5, 10 (1: Megatron's is_first_iteration line); the
#       printed lm loss equals the mean of the metrics JSONL's per-iteration losses of that
#       interval (to the printed precision) and the elapsed time its mean time; validation lines
#       "iteration 5", "iteration 10 on validation set" and, last, "iteration 10 on test set"
#       (split 969,30,1 has a test part), each between two lines of len+1 dashes, with the values
#       of the JSONL's val_loss / test_loss records;
#   (2) a run that diverges (lr 10, weight decay 10: non-finite gradient norms from iteration 4,
#       so skipped iterations): the skipped count is per interval (the JSONL's running total
#       differenced over the interval, reset after each line: the last line's count is below the
#       run's total), and the loss mean leaves the skipped iterations out;
#   (3) --train-iters 1: the summary line has finite, non-zero ms/iteration, tokens/s and GFLOP/s;
#   (4) `mtrain launch -n 4` (tp 2 x pp 2, --log-throughput): every iteration, validation and test
#       line of the launcher's output parses as it is (the launcher adds no "[rR] " to them and
#       the logging rank prints them without its tag), at iterations 1, 2, 4 and 2, 4, 4 (test).
source test/e2e_lib.sh
need_data
COMMON=(--config configs/gpt-tiny.yaml --threads 2 --train-iters 10 --log-interval 5)

"$MTRAIN" "${COMMON[@]}" --eval-interval 5 --eval-iters 1 --metrics "$TMP/a.jsonl" >"$TMP/a.log" 2>&1 \
  || { cat "$TMP/a.log"; fail "the logging run failed"; }
"$MTRAIN" "${COMMON[@]}" --lr 10 --min-lr 10 --weight-decay 10 --set optimizer.warmup_iters=0 --eval-interval 0 --eval-iters 0 \
  --metrics "$TMP/b.jsonl" >"$TMP/b.log" 2>&1 || { cat "$TMP/b.log"; fail "the diverging run failed"; }

cat >"$TMP/check.py" <<'PY'
import json, math, re, sys
log, jsonl, mode = sys.argv[1], sys.argv[2], sys.argv[3]
def die(msg):
    print("FAIL:", msg); sys.exit(1)

# The iteration line, from training_log's format strings (in their order):
E = r"(\d\.\d{6}E[+-]\d\d|INF|NAN)"  # '{:.6E}'
ITER_RE = re.compile(
    r"^ \[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6})\]"          # f" [{datetime.now().strftime('%Y-%m-%d %H:%M:%S.%f')}]"
    r" iteration(?P<it> +\d+)/(?P<total> +\d+) \|"                    # ' iteration {:8d}/{:8d} |'
    r" consumed samples:(?P<consumed> +\d+) \|"                       # ' consumed samples: {:12d} |'
    r" elapsed time per iteration \(ms\): (?P<ms>\d+\.\d) \|"          # ' elapsed time per iteration (ms): {:.1f} |'
    r"( throughput per GPU \(TFLOP/s/GPU\): (?P<tflops>\d+\.\d) \|)?"  # if args.log_throughput: f' throughput per GPU (TFLOP/s/GPU): {throughput:.1f} |'
    r" learning rate: (?P<lr>" + E + r") \|"                          # f' learning rate: {learning_rate:.6E} |'
    r" global batch size:(?P<gbs> +\d+) \|"                           # f' global batch size: {batch_size:5d} |'
    r" lm loss: (?P<loss>" + E + r") \|"                              # ' {}: {:.6E} |'.format(key, avg), key 'lm loss'
    r" loss scale: (?P<scale>\d+\.\d) \|"                             # f' loss scale: {loss_scale:.1f} |'
    r" grad norm: (?P<gn>\d+\.\d{3}|inf|nan) \|"                      # f' grad norm: {grad_norm:.3f} |'
    r" number of skipped iterations:(?P<skipped> +\d+) \|"            # ' number of skipped iterations: {:3d} |'
    r" number of nan iterations:(?P<nan> +\d+) \|$")                  # ' number of nan iterations: {:3d} |', the last
# mtrain's own figures, on the line after
EXTRA_RE = re.compile(r"^mtrain: iteration (?P<it>\d+) \| throughput \(tokens/s\): \d+ \|.* ETA: (?P<eta>[0-9hms]+) \|$")
# evaluate_and_print_results: string = f' validation loss at {prefix} | ' + '{} value: {:.6E} | ' +
# '{} PPL: {:.6E} | ' (key 'lm loss'); prefix f'iteration {iteration}' in the loop, then
# f'iteration {iteration} on validation set' and f'iteration {iteration} on test set' at the end;
# printed between two lines of '-' * (len(string) + 1)
VAL_RE = re.compile(r"^ validation loss at iteration (?P<it>\d+)(?P<where> on validation set| on test set)? \|"
                    r" lm loss value: (?P<loss>" + E + r") \| lm loss PPL: (?P<ppl>" + E + r") \| $")

lines = open(log).read().split("\n")
rows = [json.loads(l) for l in open(jsonl) if l.strip()]
its = {r["iteration"]: r for r in rows if "lm_loss" in r}
iter_lines, val_lines, order = [], [], []
for i, l in enumerate(lines):
    if " iteration " in l and "consumed samples" in l:
        m = ITER_RE.match(l)
        if not m: die("iteration line does not parse with Megatron's format: %r" % l)
        g = m.groupdict()
        for k, w, sep in (("it", 8, " "), ("total", 8, ""), ("consumed", 12, " "), ("gbs", 5, " "), ("skipped", 3, " "), ("nan", 3, " ")):
            if g[k] != sep + str(int(g[k])).rjust(w): die("%s not formatted as {:%dd}: %r" % (k, w, l))
        x = EXTRA_RE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if mode != "launch" and (not x or x["it"] != g["it"].strip()):
            die("no line of mtrain's figures after the iteration line: %r" % lines[i + 1:i + 2])
        if mode == "launch" and g["tflops"] is None: die("--log-throughput: no throughput per GPU field: %r" % l)
        g["extra"] = x["eta"] if x else ""
        iter_lines.append(g); order.append(("iter", int(g["it"])))
    elif "validation loss at" in l:
        m = VAL_RE.match(l)
        if not m: die("validation line does not parse with Megatron's format: %r" % l)
        dash = "-" * (len(l) + 1)
        if i == 0 or lines[i - 1] != dash or i + 1 >= len(lines) or lines[i + 1] != dash:
            die("validation line not between two lines of len+1 = %d dashes: %r" % (len(l) + 1, lines[i - 1:i + 2]))
        val_lines.append(m.groupdict()); order.append(("val", int(m["it"]), m["where"] or ""))

def near(printed, value, what):
    """printed is value rounded to the printed precision ('%.6E': 7 significant digits)"""
    p = float(printed)
    if not (math.isfinite(p) and math.isfinite(value)): die("%s: %s vs %r" % (what, printed, value))
    unit = 10 ** (math.floor(math.log10(abs(p))) - 6) if p else 1e-6
    if abs(p - value) > 0.51 * unit + 1e-9 * abs(value): die("%s: printed %s, expected %.9g" % (what, printed, value))

if mode == "launch":
    want = [("iter", 1), ("iter", 2), ("val", 2, ""), ("iter", 4), ("val", 4, " on validation set"), ("val", 4, " on test set")]
    if order != want: die("lines in the order %r, expected %r" % (order, want))
    print("mtrain launch -n 4: %d iteration and %d validation lines parse as printed" % (len(iter_lines), len(val_lines)))
    sys.exit(0)

# every printed interval: loss = mean over its non-skipped iterations, time = mean over all of
# them, skipped = the JSONL running total's growth over the interval
prev_line_it, prev_total = 0, 0
printed = [int(g["it"]) for g in iter_lines]
if printed != [1, 5, 10]: die("iteration lines at %r, expected [1, 5, 10]" % printed)
for g in iter_lines:
    it = int(g["it"])
    if int(g["total"]) != 10 or g["scale"] != "1.0" or int(g["consumed"]) != its[it]["consumed_samples"]:
        die("iteration %d: total, loss scale or consumed samples wrong: %r" % (it, g))
    start = 1 if it == 1 or prev_line_it == 1 else prev_line_it + 1  # the first line keeps its window
    window = range(start, it + 1)
    before = its[start - 1]["skipped"] if start > 1 else 0
    flags = [its[k]["skipped"] - (its[k - 1]["skipped"] if k > 1 else 0) for k in window]
    losses = [its[k]["lm_loss"] for k, f in zip(window, flags) if not f]
    mean = sum(losses) / len(losses) if losses else 0.0
    near(g["loss"], mean, "lm loss at iteration %d (mean of %d iterations)" % (it, len(losses)))
    ms = sum(its[k]["ms_per_iter"] for k in window) / len(window)
    if abs(float(g["ms"]) - ms) > 0.051 + 0.001 * len(window): die("iteration %d: elapsed %s ms, JSONL mean %.3f" % (it, g["ms"], ms))
    want_skipped = its[it]["skipped"] - before
    if int(g["skipped"]) != want_skipped: die("iteration %d: %s skipped printed, %d in its interval" % (it, g["skipped"], want_skipped))
    r = its[it]
    if r.get("interval_iters") != len(window) or r.get("interval_skipped") != want_skipped:
        die("iteration %d: JSONL interval fields %r" % (it, r))
    near(g["loss"], r["lm_loss_interval_avg"], "JSONL lm_loss_interval_avg at %d" % it)
    print("iteration %2d: lm loss %s = mean of %d JSONL losses (%d skipped in the interval), %s ms" % (it, g["loss"], len(losses), want_skipped, g["ms"]))
    prev_line_it = it
if iter_lines[-1]["extra"] != "0s": die("last line's ETA is not 0s: %r" % iter_lines[-1]["extra"])

if mode == "eval":
    want = [("iter", 1), ("iter", 5), ("val", 5, ""), ("iter", 10), ("val", 10, " on validation set"), ("val", 10, " on test set")]
    if order != want: die("lines in the order %r, expected %r" % (order, want))
    vals = [r for r in rows if "val_loss" in r]
    tests = [r for r in rows if "test_loss" in r]
    if [r["iteration"] for r in vals] != [5, 10] or [r["iteration"] for r in tests] != [10]:
        die("JSONL validation records %r, test records %r" % (vals, tests))
    for g, r in zip(val_lines, vals + tests):
        key = "test_loss" if "test_loss" in r else "val_loss"
        near(g["loss"], r[key], "%s at %d" % (key, r["iteration"]))
        near(g["ppl"], math.exp(min(20, r[key])), "PPL at %d" % r["iteration"])
    print("validation lines: %s" % ", ".join("iteration %s%s" % (g["it"], g["where"] or "") for g in val_lines))
else:
    total = its[10]["skipped"]
    last = int(iter_lines[-1]["skipped"])
    if not (0 < last < total): die("skipped: last line %d, run total %d: the count did not reset per interval" % (last, total))
    print("skipped iterations: %s per line, %d in the whole run" % ([int(g["skipped"]) for g in iter_lines], total))
PY
python3 "$TMP/check.py" "$TMP/a.log" "$TMP/a.jsonl" eval || { cat "$TMP/a.log"; fail "run (1)"; }
python3 "$TMP/check.py" "$TMP/b.log" "$TMP/b.jsonl" skip || { cat "$TMP/b.log"; fail "run (2)"; }

# (4) four ranks under mtrain launch, the output as the launcher prints it
"$MTRAIN" launch -n 4 -- --config configs/gpt-tiny.yaml --threads 1 --train-iters 4 --log-interval 2 --eval-interval 2 \
  --eval-iters 1 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --log-throughput >"$TMP/d.log" 2>&1 \
  || { cat "$TMP/d.log"; fail "the mtrain launch -n 4 run failed"; }
python3 "$TMP/check.py" "$TMP/d.log" /dev/null launch || { cat "$TMP/d.log"; fail "run (4)"; }

# (3) one iteration: the summary measures it
"$MTRAIN" --config configs/gpt-tiny.yaml --threads 2 --train-iters 1 --eval-interval 0 --eval-iters 0 >"$TMP/c.log" 2>&1 \
  || { cat "$TMP/c.log"; fail "the one-iteration run failed"; }
sum=$(grep -E "mtrain: finished 1 iterations: " "$TMP/c.log") || { cat "$TMP/c.log"; fail "no summary line"; }
echo "$sum"
read -r ms tok gf <<<"$(echo "$sum" | sed -E 's/.*: ([^ ]+) ms\/iteration, ([^ ]+) tokens\/s, ([^ ]+) GFLOP\/s.*/\1 \2 \3/')"
awk -v a="$ms" -v b="$tok" -v c="$gf" 'BEGIN { exit !(a + 0 > 0 && b + 0 > 0 && c + 0 > 0 && a !~ /inf|nan/ && b !~ /inf|nan/ && c !~ /inf|nan/) }' \
  || fail "one-iteration summary is not finite and non-zero: $ms ms, $tok tokens/s, $gf GFLOP/s"
echo "megatron log: iteration and validation lines parse; interval averages and counts as Megatron's"
