# Acceptance: --tensorboard-dir writes TensorBoard event files natively, as Megatron
# does. An independent reader written from the formats (test/ref/tfevents_read.py: its own
# CRC-32C and protobuf decoding) checks both masked CRCs of every record and decodes the events;
# the scalars must be exactly those of the metrics JSONL of the same run, as float32 (lm loss,
# learning-rate, grad-norm at every iteration, validation loss), at the right steps (iterations,
# and consumed samples for the "vs samples" twins), with Megatron's default tag set. A flipped
# byte or a truncated file is refused by the reader (its check can fail). Two ranks (dp 2) with
# every --log-*-to-tensorboard flag and --tensorboard-log-interval 2: exactly one events file
# (the logging rank's), scalars at iterations 2 and 4 only, the timing and flag-gated tags.
# A folder that cannot be created is a clear error naming it.
source test/e2e_lib.sh
need_data
READ=test/ref/tfevents_read.py
ARGS=(--config configs/gpt-tiny.yaml --set logging.interval=1 --set logging.eval_interval=3 --set logging.eval_iters=1)

# (1) one rank, defaults: 6 iterations, validation at 3 and 6
"$MTRAIN" "${ARGS[@]}" --train-iters 6 --threads 2 --metrics "$TMP/a.jsonl" --tensorboard-dir "$TMP/tb1/sub" \
  >"$TMP/a.log" 2>&1 || { cat "$TMP/a.log"; fail "training with --tensorboard-dir failed"; }
files=("$TMP"/tb1/sub/*)
[ ${#files[@]} -eq 1 ] || fail "expected one events file, got: ${files[*]}"
ev="${files[0]}"
base=$(basename "$ev")
[[ "$base" =~ ^events\.out\.tfevents\.[0-9]{10}\.$(hostname)\.[0-9]+\.0$ ]] \
  || fail "$base: not named events.out.tfevents.<10-digit seconds>.<hostname>.<pid>.0"
python3 "$READ" "$ev" >"$TMP/a.events" || fail "the reader refused the events file"

# check.py EVENTS JSONL MODE: compares the decoded events with the metrics JSONL
cat >"$TMP/check.py" <<'PY'
import json, math, struct, sys, time
events = [json.loads(l) for l in open(sys.argv[1])]
rows = [json.loads(l) for l in open(sys.argv[2])]
mode = sys.argv[3]
iters = [r for r in rows if "lm_loss" in r]
vals = [r for r in rows if "val_loss" in r]
consumed = {r["iteration"]: r["consumed_samples"] for r in iters}
def die(msg):
    print("FAIL:", msg); sys.exit(1)
def f32(x): return struct.unpack("<f", struct.pack("<f", x))[0]
def ulp32(v):
    b = struct.unpack("<I", struct.pack("<f", abs(v)))[0]
    return struct.unpack("<f", struct.pack("<I", b + 1))[0] - abs(v)
n_exact = n_close = 0
def same(j, v, what):
    """v is the float32 of the double the JSONL printed with %.9g: equal to float32(j), or (when
    the double sat within the %.9g rounding of a float32 midpoint) the float32 neighbour."""
    global n_exact, n_close
    if f32(j) == v: n_exact += 1; return
    if abs(j - v) <= 0.5 * ulp32(v) + abs(j) * 5e-9: n_close += 1; return
    die("%s: events file has %r, the JSONL %r (float32 %r)" % (what, v, j, f32(j)))
first = events[0]
if first.get("file_version") != "brain.Event:2" or first["step"] != 0: die("first record is not the file_version event: %r" % first)
now = time.time()
for e in events:
    if not (now - 3600 < e["wall_time"] < now + 60): die("implausible wall_time %r" % e)
if any(b["wall_time"] < a["wall_time"] for a, b in zip(events, events[1:])): die("wall_time goes backwards")
by = {}
for e in events[1:]:
    by.setdefault(e["tag"], []).append((e["step"], e["value"]))
def series(tag):
    if tag not in by: die("no '%s' in the events file (tags: %s)" % (tag, sorted(by)))
    return by[tag]
def check_train(tag, key, its):
    got, vs = series(tag), series(tag + " vs samples")
    want = [(r["iteration"], r[key]) for r in iters if r["iteration"] in its]
    if [s for s, _ in got] != [s for s, _ in want]: die("'%s' at steps %s, expected %s" % (tag, [s for s, _ in got], [s for s, _ in want]))
    if [s for s, _ in vs] != [consumed[s] for s, _ in want]: die("'%s vs samples' at steps %s, expected consumed samples %s" % (tag, [s for s, _ in vs], [consumed[s] for s, _ in want]))
    for (s, v), (_, v2), (_, j) in zip(got, vs, want):
        same(j, v, "%s at %d" % (tag, s)); same(j, v2, "%s vs samples at %d" % (tag, s))
def check_const(tag, value, its):
    for t in (tag, tag + " vs samples"):
        if sorted(v for _, v in series(t)) != [value] * len(its): die("'%s' is not %r at every step: %r" % (t, value, series(t)))
if mode == "one":
    its = {r["iteration"] for r in iters}
    default = {"learning-rate", "batch-size", "lm loss", "loss-scale", "grad-norm", "lm loss validation"}
    want_tags = default | {t + " vs samples" for t in default} | {"mtrain/tokens-per-second"}
    tags = set(by) - {"mtrain/mfu"}  # MFU only when the device's peak is known
    if tags != want_tags: die("tags %s, expected Megatron's default set %s" % (sorted(tags), sorted(want_tags)))
    if len(its) != 6: die("expected 6 iterations in the JSONL")
    tps = series("mtrain/tokens-per-second")
    if [s for s, _ in tps] != sorted(its): die("tokens-per-second steps %r" % tps)
    for (s, v), r in zip(tps, iters):
        if abs(v - r["tokens_per_s"]) > 1e-3 + 1e-6 * v: die("tokens-per-second at %d: %r vs %r" % (s, v, r["tokens_per_s"]))
else:
    its = {r["iteration"] for r in iters if r["iteration"] % 2 == 0}
    if its != {2, 4}: die("expected iterations 2 and 4 at --tensorboard-log-interval 2, JSONL has %s" % sorted(its))
    check_const("world-size", 2.0, its)
    it_time = series("iteration-time")
    if [s for s, _ in it_time] != [2, 3, 4]: die("'iteration-time' at %r: expected every log line but the first" % it_time)
    for (s, v), r in zip(it_time, iters[1:]):
        if abs(v - r["ms_per_iter"] * 1e-3) > 1e-6 + 1e-6 * v: die("iteration-time at %d: %r s vs %r ms" % (s, v, r["ms_per_iter"]))
    thr = series("throughput")
    if [s for s, _ in thr] != [1, 2, 3, 4]: die("'throughput' at %r" % thr)
    for (s, v), r in zip(thr, iters):
        if abs(v - r["tflops"]) > 2e-6 + 1e-6 * v: die("throughput at %d: %r vs %r" % (s, v, r["tflops"]))
    mem = series("mem-allocated-bytes")
    if [s for s, _ in mem] != [2, 4] or not all(v > 1e5 for _, v in mem): die("'mem-allocated-bytes': %r" % mem)
    ppl = series("lm loss validation ppl")
    if [s for s, _ in ppl] != [r["iteration"] for r in vals]: die("'lm loss validation ppl' at %r" % ppl)
    for (s, v), r in zip(ppl, vals): same(r["val_ppl"], v, "validation ppl at %d" % s)
check_train("lm loss", "lm_loss", its)
check_train("learning-rate", "lr", its)
check_train("grad-norm", "grad_norm", its)
check_const("batch-size", 8.0, its)
check_const("loss-scale", 1.0, its)
val, valvs = series("lm loss validation"), series("lm loss validation vs samples")
if not vals or [s for s, _ in val] != [r["iteration"] for r in vals]: die("'lm loss validation' at %r, JSONL validations at %r" % (val, [r["iteration"] for r in vals]))
if [s for s, _ in valvs] != [consumed[r["iteration"]] for r in vals]: die("'lm loss validation vs samples' at %r" % valvs)
for (s, v), (_, v2), r in zip(val, valvs, vals):
    same(r["val_loss"], v, "validation loss at %d" % s); same(r["val_loss"], v2, "validation loss vs samples at %d" % s)
print("%s: %d events, %d tags; %d values equal float32(JSONL), %d the float32 next to it (JSONL's %%.9g rounding)" % (mode, len(events), len(by), n_exact, n_close))
PY
python3 "$TMP/check.py" "$TMP/a.events" "$TMP/a.jsonl" one || fail "one rank: events differ from the metrics JSONL"

# (2) the reader's checks can fail: a flipped data byte, a flipped length byte, a truncated file
size=$(stat -c %s "$ev")
corrupt() { # corrupt OFFSET NAME: a copy of the file with the byte at OFFSET inverted
  cp "$ev" "$TMP/$2"
  printf "$(printf '\\%03o' $(( 255 - $(od -An -tu1 -j "$1" -N1 "$ev") )))" | dd of="$TMP/$2" bs=1 seek="$1" conv=notrunc status=none
  cmp -s "$ev" "$TMP/$2" && fail "corrupting byte $1 changed nothing"
}
corrupt $((size / 2)) mid
python3 "$READ" "$TMP/mid" >/dev/null 2>"$TMP/mid.err" && fail "a flipped byte in the middle was not caught"
grep -q "CRC mismatch" "$TMP/mid.err" || { cat "$TMP/mid.err"; fail "no CRC mismatch reported for the flipped byte"; }
corrupt 40 len # the second record's length field (the first record is 40 bytes)
python3 "$READ" "$TMP/len" >/dev/null 2>"$TMP/len.err" && fail "a flipped length byte was not caught"
grep -q "length CRC mismatch" "$TMP/len.err" || { cat "$TMP/len.err"; fail "no length CRC mismatch reported"; }
head -c $((size - 3)) "$ev" >"$TMP/short"
python3 "$READ" "$TMP/short" >/dev/null 2>&1 && fail "a truncated file was not caught"
echo "reader: flipped data byte, flipped length byte and truncation all refused"

# (3) two ranks, dp 2, every flag, --tensorboard-log-interval 2: one events file, the flag-gated tags
"$MTRAIN" launch -n 2 -- "${ARGS[@]}" --train-iters 4 --set logging.eval_interval=4 --micro-batch-size 4 --threads 1 \
  --metrics "$TMP/b.jsonl" --tensorboard-dir "$TMP/tb2" --tensorboard-log-interval 2 --log-timers-to-tensorboard \
  --log-throughput --log-validation-ppl-to-tensorboard --log-world-size-to-tensorboard --log-memory-to-tensorboard \
  >"$TMP/b.log" 2>&1 || { cat "$TMP/b.log"; fail "two-rank training with --tensorboard-dir failed"; }
n=$(ls "$TMP/tb2" | wc -l)
[ "$n" -eq 1 ] || { ls -l "$TMP/tb2"; fail "two ranks wrote $n events files, expected exactly one"; }
python3 "$READ" "$TMP"/tb2/* >"$TMP/b.events" || fail "the reader refused the two-rank events file"
python3 "$TMP/check.py" "$TMP/b.events" "$TMP/b.jsonl" two || fail "two ranks: events differ from the metrics JSONL"

# (4) a folder that cannot be created: an error naming it
touch "$TMP/plain"
"$MTRAIN" "${ARGS[@]}" --train-iters 1 --threads 2 --tensorboard-dir "$TMP/plain/tb" >"$TMP/c.log" 2>&1 \
  && fail "a --tensorboard-dir under a plain file was accepted"
grep -q "$TMP/plain/tb" "$TMP/c.log" && grep -q "tensorboard" "$TMP/c.log" \
  || { cat "$TMP/c.log"; fail "the error does not name the TensorBoard folder"; }
echo "unwritable folder: $(grep -m1 'error' "$TMP/c.log" | cut -c1-200)"
