# `mtrain plan` through the CLI: the readable report, --json parsed by python3, the
# published anchors end to end (GPT-3 175B ~34 days; Llama-3 70B 145 days), exit codes
# (0 fits, 1 inconsistent layout, 2 bad usage, 3 does not fit), clear messages for every
# inconsistency, and --search for gpt175b on 1024 x A100-80G (layouts that fit, #1 explained).
source test/e2e_lib.sh
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

run() { # run EXPECTED_RC cmd...: output in $TMP/out, $TMP/err
  local want="$1"; shift
  "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
  [ $rc -eq "$want" ] || { cat "$TMP/out" "$TMP/err" | tail -n 30; fail "exit $rc (wanted $want): $*"; }
}
has() { grep -qF -- "$1" "$2" || { cat "$2" | tail -n 30; fail "'$1' not in $2"; }; }

# the CPU recipe on one rank: fits in host memory; fp32 trainer layout
run 0 "$MTRAIN" plan --config configs/gpt-tiny.yaml --gpus 1
has "fp32 (mtrain's trainer layout)" "$TMP/out"
has "verdict: fits" "$TMP/out"
echo "ok: gpt-tiny on one CPU rank"

# GPT-3 175B on 1024 A100 at 138 TFLOP/s with full recompute: Megatron's 8TP/(nX) ~ 34 days
run 0 "$MTRAIN" plan --config configs/gpt175b.yaml --gpus 1024 --gpu a100-80g --set parallel.data=auto \
  --recompute-granularity full --tflops 138 --json
"$PY" - "$TMP/out" <<'EOF' || fail "gpt175b JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ok"] and d["layout"]["dp"] == 8 and d["layout"]["tp"] == 8 and d["layout"]["pp"] == 16
assert abs(d["params"]["n_params"] / 174.6e9 - 1) < 0.01, d["params"]
days = d["time"]["days_ctp_tflops"]
assert 33.5 < days < 35.0, days
assert d["memory"]["fits"] is True
assert abs(d["pipeline"]["bubble"] - 15 / (192 + 15)) < 1e-9
for g in ("tp", "pp", "dp"):
    assert d["comm"][g]["bytes"] > 0, g
print("gpt175b: %.2f days at 138 TFLOP/s (8TP/nX), %.2f days from the detailed FLOPs" % (days, d["time"]["days_tflops"]))
EOF

# --grad-reduce-in-bf16 (Megatron's flag): the gradient buffer halves, and so does the dp reduce-scatter's
# share of the dp bytes; the parameter all-gather's (bf16 either way) stays: 4 + 2 bytes per element -> 2 + 2
for f in "" --grad-reduce-in-bf16; do
  run 0 "$MTRAIN" plan --config configs/gpt175b.yaml --gpus 4096 --set parallel.data=auto --json $f
  cp "$TMP/out" "$TMP/gr$f.json"
done
"$PY" - "$TMP/gr.json" "$TMP/gr--grad-reduce-in-bf16.json" <<'EOF' || fail "--grad-reduce-in-bf16"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["layout"]["distributed_optimizer"] and b["layout"]["distributed_optimizer"]
for s in ("first", "last"):
    assert abs(b["memory"][s]["grads_bytes"] / a["memory"][s]["grads_bytes"] - 0.5) < 1e-9, s
ra, rb = a["comm"]["dp"]["bytes"], b["comm"]["dp"]["bytes"]
assert abs(rb / ra - 4 / 6) < 1e-6, (ra, rb)
assert b["cost_model"]["step_s"] < a["cost_model"]["step_s"]
print("--grad-reduce-in-bf16: gradient buffers x 0.5, dp bytes x %.4f" % (rb / ra))
EOF
echo "ok: --grad-reduce-in-bf16"

# Llama-3 70B, 15T tokens, 1024 H100 at 50% MFU: 6TP/(nX) = 145 days
run 0 "$MTRAIN" plan --config configs/llama3-70b.yaml --gpus 1024 --gpu h100-80g --set parallel.data=auto --mfu 0.5 --json
"$PY" - "$TMP/out" <<'EOF' || fail "llama3-70b JSON"
import json, sys
d = json.load(open(sys.argv[1]))
days = d["time"]["days_6tp_mfu"]
assert abs(days / 145.1 - 1) < 0.02, days
print("llama3-70b: %.1f days at 50%% MFU (6TP/nX), %.1f days with attention FLOPs" % (days, d["time"]["days_mfu"]))
EOF

# the readable report of the same, and a measured step time
run 0 "$MTRAIN" plan --config configs/llama3-70b.yaml --gpus 1024 --gpu h100-80g --set parallel.data=auto --step-ms 9000
for s in "parameters" "embedding share" "memory per rank" "activations" "bubble" "ideal speed-up" \
         "tp allgather + reduce-scatter" "pp send/recv" "dp reduce-scatter" "cp ring" "measured step" "MFU" "verdict: fits"; do
  has "$s" "$TMP/out"
done
echo "ok: llama3-70b report"

# Mixtral: total and active parameters, expert all-to-all
run 0 "$MTRAIN" plan --config configs/mixtral-8x7b.yaml --gpu h100-80g --json
"$PY" - "$TMP/out" <<'EOF' || fail "mixtral JSON"
import json, sys
d = json.load(open(sys.argv[1]))
p = d["params"]
assert abs(p["n_params"] / 46.7e9 - 1) < 0.01 and abs(p["n_active"] / 12.9e9 - 1) < 0.01, p
assert d["comm"]["ep"]["bytes"] > 0
print("mixtral: %.2fB total, %.2fB active" % (p["n_params"] / 1e9, p["n_active"] / 1e9))
EOF

# does not fit: exit 3 and the verdict says by how much
run 3 "$MTRAIN" plan --config configs/gpt175b.yaml --gpus 8 --gpu a100-40g --set parallel.pipeline=1 --set parallel.data=auto
has "does NOT fit (needs" "$TMP/out"
run 3 "$MTRAIN" plan --config configs/gpt175b.yaml --gpus 8 --gpu a100-40g --set parallel.pipeline=1 --set parallel.data=auto --json
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["memory"]["fits"] is False' "$TMP/out" || fail "not-fit JSON"
echo "ok: does-not-fit verdict"

# inconsistencies: exit 1 with the key at fault
run 1 "$MTRAIN" plan --config configs/gpt175b.yaml --gpus 1024 --gpu a100-80g
has "parallel.data" "$TMP/err"
run 1 "$MTRAIN" plan --config configs/gpt175b.yaml --gpus 1000 --gpu a100-80g --set parallel.data=auto
has "parallel.data" "$TMP/err"
run 1 "$MTRAIN" plan --config configs/gpt175b.yaml --gpus 1024 --gpu a100-80g --set parallel.data=auto --set model.heads=100
has "model.heads" "$TMP/err"
run 1 "$MTRAIN" plan --config configs/gpt175b.yaml --gpus 1536 --gpu a100-80g --set parallel.tensor=16 --set parallel.data=auto
has "spans nodes" "$TMP/err"
run 1 "$MTRAIN" plan --config configs/gpt175b.yaml --gpus 1024 --gpu a100-80g --set parallel.data=auto \
  --virtual-pipeline-model-parallel-size 2 --global-batch-size 1544
has "virtual_pipeline" "$TMP/err"
run 1 "$MTRAIN" plan --config configs/gpt175b.yaml --gpus 1000 --gpu a100-80g --set parallel.data=auto --json
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ok"] is False and d["problems"]' "$TMP/out" || fail "problems JSON"
echo "ok: inconsistent layouts named"

# bad usage: exit 2
run 2 "$MTRAIN" plan --config configs/gpt-tiny.yaml
has "--gpus" "$TMP/err"
run 2 "$MTRAIN" plan --config configs/gpt175b.yaml --gpu b200
has "a100-80g" "$TMP/err"
run 2 "$MTRAIN" plan --config configs/gpt175b.yaml --mfu 1.5
run 2 "$MTRAIN" plan --config configs/gpt175b.yaml --no-such-flag
has "unknown argument" "$TMP/err"
run 2 "$MTRAIN" plan --config configs/gpt175b.yaml --fp8-recipe mxfp8
has "fp8-recipe mxfp8: the plan models 'delayed'" "$TMP/err"
run 2 "$MTRAIN" plan
has "no recipe" "$TMP/err"
run 0 "$MTRAIN" plan --help
echo "ok: usage errors"

# --search: gpt175b on 1024 x A100-80G
run 0 "$MTRAIN" plan --config configs/gpt175b.yaml --gpus 1024 --gpu a100-80g --search
has "why #1:" "$TMP/out"
head -n 8 "$TMP/out"
run 0 "$MTRAIN" plan --config configs/gpt175b.yaml --gpus 1024 --gpu a100-80g --search --json
"$PY" - "$TMP/out" <<'EOF' || fail "search JSON"
import json, sys
d = json.load(open(sys.argv[1]))
top = d["top"]
assert d["ok"] and len(top) == 10 and d["n_fit"] >= 10, (d["n_fit"], len(top))
for c in top:
    l, m = c["layout"], c["memory"]
    assert m["fits"] and m["need_bytes"] <= m["usable_bytes"]
    assert l["tp"] * l["pp"] * l["cp"] * l["dp"] == 1024 and l["tp"] <= 8
    assert c["reason"]
steps = [c["cost_model"]["step_s"] for c in top]
assert steps == sorted(steps)
assert d["why"].startswith("#1 (")
print("search: %d fit; #1 %s, %.2f s/step" % (d["n_fit"], top[0]["layout_str"], steps[0]))
EOF
# --search where nothing fits: exit 3, and how close the smallest layout comes
run 3 "$MTRAIN" plan --config configs/gpt175b.yaml --gpus 8 --gpu a100-80g --search
has "no layout fits: the smallest" "$TMP/out"
echo "ok: search with nothing that fits"
# --probe writes a device profile; --device FILE plans with it (not timing-based: a profile with every
# rate halved and every fixed cost doubled must predict exactly twice the step time)
run 0 "$MTRAIN" plan --probe "$TMP/prof.json"
has "device profile written" "$TMP/out"
"$PY" - "$TMP/prof.json" "$TMP/slow.json" "$TMP/bad.json" <<'EOF' || fail "probe profile"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "mtrain-device-profile-1" and d["threads"] >= 1 and d["mem_bytes"] > 0
assert d["coll_alpha_s"] >= d["comm_alpha_s"] > 0
assert len(d["gemm"]) >= 3 and all(g["flops_1t"] > 0 and g["flops_nt"] > 0 and g["flops_2r"] > 0 for g in d["gemm"])
rates = ("stream_gbs_1t", "stream_gbs_nt", "stream_gbs_2r", "attn_flops_1t", "attn_flops_nt", "attn_flops_2r",
         "comm_gbs")
for k in rates:
    assert d[k] > 0, k
for k in rates:
    d[k] /= 2
for k in ("op_overhead_s", "comm_alpha_s", "coll_alpha_s"):
    d[k] *= 2
for g in d["gemm"]:
    for k in ("flops_1t", "flops_nt", "flops_2r"):
        g[k] /= 2
json.dump(d, open(sys.argv[2], "w"))
del d["comm_gbs"]
json.dump(d, open(sys.argv[3], "w"))
EOF
TP2=(--config configs/gpt-tiny.yaml --gpus 2 --tensor-model-parallel-size 2 --backend cpu --json)
run 0 "$MTRAIN" plan "${TP2[@]}" --device "$TMP/prof.json"
cp "$TMP/out" "$TMP/fast.out"
run 0 "$MTRAIN" plan "${TP2[@]}" --gpu "$TMP/slow.json"
"$PY" - "$TMP/fast.out" "$TMP/out" <<'EOF' || fail "--device FILE not used"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["device"]["name"] == "probed", a["device"]
sa, sb = a["cost_model"]["step_s"], b["cost_model"]["step_s"]
assert sa > 0 and abs(sb / sa - 2) < 1e-6, (sa, sb)
assert a["cost_model"]["tp_s"] > 0
print("probe: gpt-tiny tp=2 predicted %.1f ms/step; with half the rates %.1f" % (1e3 * sa, 1e3 * sb))
EOF
run 2 "$MTRAIN" plan "${TP2[@]}" --device "$TMP/bad.json"
has "comm_gbs" "$TMP/err"
# training.threads is the thread count the plan times a rank at (as the trainer runs it): with 1 thread
# only the 1-thread rates count, so a profile whose all-core rates are halved predicts the same step
"$PY" - "$TMP/prof.json" "$TMP/nt_half.json" <<'EOF' || fail "probe profile (all-core rates halved)"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("stream_gbs_nt", "attn_flops_nt"):
    d[k] /= 2
for g in d["gemm"]:
    g["flops_nt"] /= 2
json.dump(d, open(sys.argv[2], "w"))
EOF
ONE=(--config configs/gpt-tiny.yaml --gpus 1 --backend cpu --json)
run 0 "$MTRAIN" plan "${ONE[@]}" --set training.threads=1 --device "$TMP/prof.json"
cp "$TMP/out" "$TMP/t1.out"
run 0 "$MTRAIN" plan "${ONE[@]}" --set training.threads=1 --device "$TMP/nt_half.json"
cp "$TMP/out" "$TMP/t1_half.out"
run 0 "$MTRAIN" plan "${ONE[@]}" --device "$TMP/prof.json"
cp "$TMP/out" "$TMP/tn.out"
run 0 "$MTRAIN" plan "${ONE[@]}" --device "$TMP/nt_half.json"
"$PY" - "$TMP/prof.json" "$TMP/t1.out" "$TMP/t1_half.out" "$TMP/tn.out" "$TMP/out" <<'EOF' || fail "training.threads"
import json, sys
threads = json.load(open(sys.argv[1]))["threads"]
a, b, c, d = (json.load(open(f))["cost_model"]["step_s"] for f in sys.argv[2:6])
assert a > 0 and a == b, (a, b)  # 1 thread: the all-core rates do not enter
if threads > 1:
    assert d > c, (c, d)  # all cores (the default): they do
print("probe: gpt-tiny 1 rank, training.threads=1 %.1f ms/step, all %d cores %.1f" % (1e3 * a, threads, 1e3 * c))
EOF
echo "ok: probe and device profile"

# the held-out published runs (scripts/plan-heldout.sh, docs/plan.md): plumbing only, their
# ratios are not asserted here (held out); exit 0 (bands met) or 1 (not met), one ratio per run (8), a verdict
scripts/plan-heldout.sh --mtrain "$MTRAIN" >"$TMP/heldout.out" 2>&1; rc=$?
{ [ $rc -eq 0 ] || [ $rc -eq 1 ]; } || { cat "$TMP/heldout.out"; fail "plan-heldout.sh exit $rc"; }
n=$(grep -cE ' [0-9]+\.[0-9]{3}  \((TFLOP|tokens)/s\)$' "$TMP/heldout.out")
[ "$n" -eq 8 ] || { cat "$TMP/heldout.out"; fail "plan-heldout.sh: $n rows with a ratio, expected 8"; }
grep -qE '^held out: 8 rows, median predicted / published [0-9.]+, [0-9]+ within 15%: the bands .* are (met|not met)$' \
  "$TMP/heldout.out" || { cat "$TMP/heldout.out"; fail "plan-heldout.sh: no verdict line"; }
[ $rc -eq 0 ] || ! grep -q 'are met$' "$TMP/heldout.out" || fail "plan-heldout.sh: 'met' printed with exit $rc"
echo "ok: held-out runs: $(tail -n 1 "$TMP/heldout.out")"
echo "all plan checks passed"
