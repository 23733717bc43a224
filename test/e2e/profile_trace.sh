# Acceptance (profiling): --profile with --profile-step-start 2 --profile-step-end 3 on a
# pp=4 run (gpt-tiny, 4 layers: one per stage, global batch 8 of micro-batch 1: m = 8 micro-batches,
# 5 iterations) writes ONE Chrome trace (logging.profile_path) that
#   - loads as JSON (python3 json.load) with a "traceEvents" list of complete ("X") events;
#   - has one track per rank (pid 0..3, each named by a process_name event) and events on each;
#   - holds, on every stage and for each profiled iteration, one forward-compute and one
#     backward-compute event per micro-batch (0..7), and only iterations 2 and 3;
#   - shows pipeline idle time that agrees with the bubble the iteration line reports: per
#     iteration, 1 - sum over stages of the F + B event durations / sum over stages of the
#     forward-backward span equals 'pipeline bubble: measured X%' of that iteration within
#     1 percentage point. Why so close: both come from the same clock reads (the executor's busy
#     time is the F / B events' time; its table time is the forward-backward span less a function
#     call), so what separates them is the line's rounding to 0.1%, the f32 sums of the bubble's
#     reduction (~1e-7 relative) and the trace's microsecond rounding (3 decimals): << 1 point.
#     A trace on another clock, events from outside the iteration, or lost / doubled micro-batches
#     move it by far more (an F or B is ~1-5% of a stage's iteration here).
# Also: the file is written atomically (no .tmp left), and a run without --profile writes none.
source test/e2e_lib.sh
need_data
OUT="$TMP/trace.json"
ARGS=(--config configs/gpt-tiny.yaml --data-path "$DATA" --train-iters 5 --micro-batch-size 1 --global-batch-size 8
      --seq-length 64 --num-layers 4 --pipeline-model-parallel-size 4 --log-interval 1 --set logging.eval_interval=0)
"$MTRAIN" launch -n 4 -- "${ARGS[@]}" --profile --profile-step-start 2 --profile-step-end 3 \
  --set logging.profile_path="$OUT" >"$TMP/run.log" 2>&1 || { tail -n 30 "$TMP/run.log"; fail "profiled pp=4 run failed"; }
[ -f "$OUT" ] || { tail -n 20 "$TMP/run.log"; fail "no trace at $OUT"; }
[ ! -e "$OUT.tmp" ] || fail "the temporary $OUT.tmp was left behind"
grep -q "profile trace of iterations 2..3 (4 ranks) written to $OUT" "$TMP/run.log" || fail "no line naming the trace"
for it in 2 3; do
  b=$(grep "mtrain: iteration $it |" "$TMP/run.log" | grep -o "pipeline bubble: measured [0-9.]*%" | grep -o "[0-9.]*")
  [ -n "$b" ] || fail "no bubble on the line of iteration $it"
  echo "iteration $it: line reports bubble $b%"
  eval "B$it=$b"
done
python3 - "$OUT" "$B2" "$B3" <<'EOF' || fail "trace check failed"
import json, sys
path, lines = sys.argv[1], {2: float(sys.argv[2]), 3: float(sys.argv[3])}
d = json.load(open(path))
ev = d["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "process_name"}
assert sorted(names) == [0, 1, 2, 3], f"process tracks {sorted(names)}"
x = [e for e in ev if e.get("ph") == "X"]
assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in x), "negative ts or dur"
assert {e["pid"] for e in x} == {0, 1, 2, 3}, "some rank has no events"
assert {e["args"]["iteration"] for e in x} == {2, 3}, "events outside the profiled iterations"
for pid in range(4):
    print(f"  track {pid}: {names[pid]}, {sum(e['pid'] == pid for e in x)} events")
worst = 0.0
for it in (2, 3):
    busy = span = 0.0
    for pid in range(4):
        mine = [e for e in x if e["pid"] == pid and e["args"]["iteration"] == it]
        for kind in ("forward-compute", "backward-compute"):
            mbs = sorted(e["args"]["microbatch"] for e in mine if e["name"] == kind)
            assert mbs == list(range(8)), f"rank {pid} iteration {it}: {kind} micro-batches {mbs}"
        fb = [e for e in mine if e["name"] == "forward-backward"]
        assert len(fb) == 1, f"rank {pid} iteration {it}: {len(fb)} forward-backward spans"
        s = fb[0]["dur"]
        b = sum(e["dur"] for e in mine if e["name"] in ("forward-compute", "backward-compute"))
        t0, t1 = fb[0]["ts"], fb[0]["ts"] + s
        assert all(t0 - 1 <= e["ts"] and e["ts"] + e["dur"] <= t1 + 1 for e in mine
                   if e["name"] in ("forward-compute", "backward-compute")), "F/B outside the forward-backward span"
        print(f"  iteration {it} stage {pid}: span {s / 1e3:.2f} ms, F+B {b / 1e3:.2f} ms, idle {100 * (1 - b / s):.1f}%")
        busy += b
        span += s
    bub = 100 * (1 - busy / span)
    diff = abs(bub - lines[it])
    worst = max(worst, diff)
    print(f"iteration {it}: trace idle (mean over stages) {bub:.2f}% vs line {lines[it]:.1f}%: |diff| {diff:.3f} points")
    assert diff <= 1.0, f"iteration {it}: trace idle {bub:.2f}% vs the line's {lines[it]}%"
print(f"worst |trace idle - reported bubble| = {worst:.3f} percentage points (tolerance 1)")
EOF
# without --profile: no trace
"$MTRAIN" launch -n 4 -- "${ARGS[@]}" --train-iters 3 --set logging.profile_path="$TMP/none.json" >"$TMP/off.log" 2>&1 \
  || { tail -n 20 "$TMP/off.log"; fail "unprofiled run failed"; }
[ ! -e "$TMP/none.json" ] || fail "a run without --profile wrote a trace"
# an end before the start is refused before training, naming the keys
if "$MTRAIN" "${ARGS[@]}" --pipeline-model-parallel-size 1 --profile --profile-step-start 5 --profile-step-end 4 \
     >"$TMP/bad.log" 2>&1; then fail "profile_end < profile_start should be refused"; fi
grep -q "logging.profile_end" "$TMP/bad.log" || { cat "$TMP/bad.log"; fail "no message naming logging.profile_end"; }
echo "PASS"
