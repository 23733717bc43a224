# `mtrain plan --timeline` / `--timeline-svg`: the pipeline schedule the
# trainer runs, drawn from the same tables (parallel/schedule.c) timed by the simulator with unit
# costs (F 1, B 2, free transfers). For p=4, m=8 (1F1B) the bubble is 3/11 = 27.3% and for p=4,
# m=8, v=2 (interleaved) 3/19 = 15.8%: with equal stages the simulated makespan is exactly
# 3(v m + p - 1) units, so the printed share equals the formula to the printed digit (the
# schedule unit test checks it to 1e-16 for 756 configurations). The SVG is parsed by python3's
# XML parser and must hold one rectangle per F and per B (p m v of each) and one bubble
# background per stage; it is written through a temporary that is renamed (none is left), and a
# target that is a folder or in a missing folder is refused with exit 1. With the stages' FLOPs
# (--timeline-costs flops) the last stage (output layer) is heavier, so the bubble is larger than
# the formula. No training run: about a second.
source test/e2e_lib.sh
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
PP4=(--config configs/gpt-tiny.yaml --gpus 4 --set parallel.pipeline=4 --set training.micro_batch=1 --set training.global_batch=8)

run() { # run EXPECTED_RC cmd...: output in $TMP/out, $TMP/err
  local want="$1"; shift
  "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
  [ $rc -eq "$want" ] || { cat "$TMP/out" "$TMP/err" | tail -n 30; fail "exit $rc (wanted $want): $*"; }
}
has() { grep -qF -- "$1" "$2" || { tail -n 30 "$2"; fail "'$1' not in $2"; }; }

# 1F1B p=4 m=8: 3/11
run 0 "$MTRAIN" plan "${PP4[@]}" --timeline
has "1f1b schedule, p = 4 stages, m = 8 micro-batches, v = 1" "$TMP/out"
has "bubble: 27.3% of the step" "$TMP/out"
has "formula: (p-1)/(m+p-1) = 3/(8+3) = 27.3%" "$TMP/out"
grep -q '^formula: .*: equal$' "$TMP/out" || fail "the 1f1b bubble should equal the formula"
for s in 0 1 2 3; do has "  stage $s |" "$TMP/out"; done
grep -q '^  stage 3 |\(~\)*F0 B0 ' "$TMP/out" || { cat "$TMP/out"; fail "the last stage should start F0 B0 (1F1B without warm-up)"; }
[ "$(grep -c 'F7' "$TMP/out")" -eq 4 ] || fail "every stage should draw F7"
has "legend:" "$TMP/out"
echo "ok: 1f1b p=4 m=8 timeline, bubble 27.3% = (p-1)/(m+p-1)"
cp "$TMP/out" "$TMP/1f1b.txt"

# interleaved p=4 m=8 v=2 (8 layers: two per stage): 3/19, and the SVG
run 0 "$MTRAIN" plan "${PP4[@]}" --set model.layers=8 --set parallel.virtual_pipeline=2 --timeline \
  --timeline-svg "$TMP/iv.svg"
has "interleaved schedule, p = 4 stages, m = 8 micro-batches, v = 2" "$TMP/out"
has "bubble: 15.8% of the step" "$TMP/out"
has "formula: (p-1)/(v*m+p-1) = 3/(2*8+3) = 15.8%" "$TMP/out"
grep -q '^formula: .*: equal$' "$TMP/out" || fail "the interleaved bubble should equal the formula"
has "wrote $TMP/iv.svg" "$TMP/out"
grep -q 'f7' "$TMP/out" || fail "the second chunk's forwards (f) are not drawn"
ls "$TMP" | grep -q '\.tmp\.' && fail "a temporary of the SVG was left behind"
"$PY" - "$TMP/iv.svg" <<'EOF' || fail "the interleaved SVG"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()   # raises on malformed XML
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
rects = list(root.iter(ns + "rect"))
count = lambda c: sum(1 for r in rects if r.get("class") == c)
p, m, v = 4, 8, 2
assert count("fwd") == p * m * v and count("bwd") == p * m * v, (count("fwd"), count("bwd"))
assert count("bubble") == p, count("bubble")
texts = " ".join(t.text or "" for t in root.iter(ns + "text"))
assert "bubble 15.8%" in texts and "(p-1)/(v*m+p-1) = 15.8%" in texts, texts[:300]
for s in range(p): assert "stage %d" % s in texts
for r in rects:
    if r.get("class") in ("fwd", "bwd"): assert float(r.get("width")) > 0
print("svg: %d F + %d B rectangles, %d stage rows, parsed by xml.etree" % (count("fwd"), count("bwd"), count("bubble")))
EOF
echo "ok: interleaved p=4 m=8 v=2 timeline, bubble 15.8% = (p-1)/(vm+p-1), SVG valid"

# the SVG alone replaces an existing file atomically, and 1F1B's has p m rectangles of each kind
echo "old" >"$TMP/a.svg"
run 0 "$MTRAIN" plan "${PP4[@]}" --timeline-svg "$TMP/a.svg"
"$PY" -c "
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot(); ns = '{http://www.w3.org/2000/svg}'
n = [sum(1 for x in r.iter(ns + 'rect') if x.get('class') == c) for c in ('fwd', 'bwd')]
assert n == [32, 32], n" "$TMP/a.svg" || fail "1f1b SVG"
ls "$TMP" | grep -q '\.tmp\.' && fail "a temporary of the SVG was left behind"

# refused targets: a folder, a missing folder
mkdir -p "$TMP/dir.svg"
run 1 "$MTRAIN" plan "${PP4[@]}" --timeline-svg "$TMP/dir.svg"
has "not a regular file" "$TMP/err"
run 1 "$MTRAIN" plan "${PP4[@]}" --timeline-svg "$TMP/no/such/t.svg"
has "--timeline-svg $TMP/no/such/t.svg" "$TMP/err"
run 2 "$MTRAIN" plan "${PP4[@]}" --timeline-costs fast
has "expected unit or flops" "$TMP/err"
run 2 "$MTRAIN" plan "${PP4[@]}" --timeline-svg
has "--timeline-svg needs a value" "$TMP/err"
echo "ok: refused targets and bad values"

# stages by their FLOPs: the output layer makes the last stage heavier, the bubble grows
run 0 "$MTRAIN" plan "${PP4[@]}" --timeline --timeline-costs flops
b=$(sed -n 's/^bubble: \([0-9.]*\)% .*/\1/p' "$TMP/out")
awk -v b="$b" 'BEGIN { exit !(b > 27.3 && b < 45) }' || fail "FLOP costs: bubble $b% should exceed the formula's 27.3%"
echo "ok: stages by FLOPs: bubble $b% > 27.3%"
# interleaved with the embedding and loss counted (6 layers on 4 x 2 chunks: the first chunk embeds only,
# at no layer cost): every stage is drawn, with the interleaved formula beside
run 0 "$MTRAIN" plan "${PP4[@]}" --set model.layers=6 --set parallel.virtual_pipeline=2 \
  --set parallel.embedding_in_split=true --set parallel.loss_in_split=true --timeline
has "  stage 3 |" "$TMP/out"
has "formula: (p-1)/(v*m+p-1) = 3/(2*8+3)" "$TMP/out"
echo "ok: interleaved with both ends counted: $(grep '^bubble:' "$TMP/out")"
# --json: the same timeline as one object; the test recomputes the bubble from the steps themselves
# (mean over stages of 1 - time in F and B / makespan) and checks the schedule's shape: m v
# forwards and backwards per stage, one after another (no overlap), inside the makespan
for lay in "1f1b 1 8" "interleaved 2 8"; do
  set -- $lay
  run 0 "$MTRAIN" plan "${PP4[@]}" --set model.layers=8 --set parallel.virtual_pipeline=$2 --timeline --json
  "$PY" - "$TMP/out" "$1" "$2" "$3" <<'EOF' || fail "--timeline --json ($1)"
import json, sys
d = json.load(open(sys.argv[1]))
kind, v, m = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
p = 4
assert d["kind"] == kind and d["p"] == p and d["m"] == m and d["v"] == v, d
want = (p - 1) / (v * m + p - 1)
assert abs(d["formula"] - want) < 1e-9 and abs(d["bubble"] - want) < 1e-9, (d["bubble"], want)
idle = []
for st in d["stages"]:
    comp = [x for x in st["steps"] if x["op"] in ("F", "B")]
    assert sum(x["op"] == "F" for x in comp) == m * v and sum(x["op"] == "B" for x in comp) == m * v, st["stage"]
    last = 0.0
    for x in comp:
        assert x["start"] >= last - 1e-9 and x["end"] > x["start"], (st["stage"], x)
        last = x["end"]
    assert last <= d["makespan"] + 1e-9
    busy = sum(x["end"] - x["start"] for x in comp)
    assert abs(busy - st["busy"]) < 1e-9, (busy, st["busy"])
    idle.append(1 - busy / d["makespan"])
assert abs(sum(idle) / p - d["bubble"]) < 1e-9, (sum(idle) / p, d["bubble"])
EOF
done
run 2 "$MTRAIN" plan "${PP4[@]}" --timeline --json --compare "$TMP/none.jsonl"
has "--json prints one object" "$TMP/err"
echo "ok: --timeline --json: bubble recomputed from the steps = (p-1)/(vm+p-1), for 1f1b and interleaved"
echo "--- the 1f1b picture:"
cat "$TMP/1f1b.txt"
