# test/e2e_lib.sh — helpers shared by the end-to-end scripts (sourced, not run).
# MTRAIN is set by test/run.sh; tests run from the repository root.
MTRAIN="${MTRAIN:-$PWD/mtrain}"
DATA="${DATA:-data/kjv_text_document}"
TMP=$(mktemp -d /tmp/mtrain-e2e.XXXXXX)
# on exit (a failed check included) no process this test started may outlive it
cleanup() { local p; p=$(marked_pids "$TMP/" prefix); [ -z "$p" ] || kill -KILL $p 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
need_data() { [ -f "$DATA.idx" ] || fail "$DATA.idx missing: run scripts/fetch-corpus.sh data (make test does)"; }
# --- launcher tests (and wait_exit, of test/proc_lib.sh) ---
source test/proc_lib.sh
# private_mtrain: run a private copy of the binary, so that a concurrent `make` relinking ./mtrain
# cannot pull it from under the ranks
private_mtrain() { cp "$MTRAIN" "$TMP/mtrain" && MTRAIN="$TMP/mtrain"; }
# no_outer_launcher [--batch]: the ranks must not inherit a launcher from whoever runs the tests:
# unsets the torchrun / env:// and PMIx variables (PMIX_MCA_* settings stay), with --batch Slurm's
# and Open MPI's too
no_outer_launcher() {
  local v
  unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT MT_BOOTSTRAP MT_STORE_PORT
  for v in $(env | grep -oE '^PMIX_[A-Z0-9_]+' | grep -v '^PMIX_MCA_'); do unset "$v"; done
  if [ "${1:-}" = --batch ]; then
    for v in $(env | grep -oE '^(SLURM|OMPI)_[A-Z0-9_]+'); do unset "$v"; done
  fi
}
# json_field FILE KEY: the KEY values of every line of a JSON-lines file that has KEY
json_field() { grep -o "\"$2\":[^,}]*" "$1" | cut -d: -f2; }

# --- failure cases (dp_failures.sh, pp_failures.sh) ---
# shm_segments: how many mtrain segments are in /dev/shm now
shm_segments() { ls /dev/shm | grep -c '^mtrain-' || true; }
# marked_pids MARK [prefix]: pids of the live processes whose environment holds MT_E2E_MARK=MARK
# (prefix: MT_E2E_MARK=MARK...). run_case starts the launcher with MT_E2E_MARK=$TMP/CASE and the
# ranks inherit it; no other process on a shared machine has it (the test shell itself does not
# export it), so this finds exactly what this test started, and nothing is looked up by name.
marked_pids() {
  local x=-x; [ "${2:-}" = prefix ] && x=""
  grep -lzF $x -- "MT_E2E_MARK=$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true
}
rank_pid() { # rank_pid LAUNCHER_PID RANK: pid of that rank's process
  local p
  for p in $(pgrep -P "$1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMIX_RANK=$2"; then echo "$p"; return; fi
  done
}
wait_iter() { # wait until the log shows an iteration line (training is in its loop)
  for _ in $(seq 1 300); do grep -q "iteration " "$1" 2>/dev/null && return 0; sleep 0.1; done
  cat "$1"; fail "training did not start"
}
# run_case NAME SIGNAL TIMEOUT_S EXPECTED_TEXT [CHECK]: `mtrain launch -n 4 -- "${ARGS[@]}"`, once
# training is in its loop (and `CHECK NAME LOG` passed, when given) send SIGNAL to rank 2; the
# launcher must exit non-zero within 30 s, the log must show EXPECTED_TEXT and an error from each
# of the 3 surviving ranks, and no rank may be left running.
run_case() {
  local name="$1" sig="$2" tmo="$3" want="$4" check="${5:-}"
  local mark="$TMP/$name" # unique to this test run and case: see marked_pids
  MT_E2E_MARK="$mark" "$MTRAIN" launch -n 4 -- "${ARGS[@]}" --set parallel.timeout_s=$tmo >"$TMP/$name.log" 2>&1 &
  local launcher=$!
  wait_iter "$TMP/$name.log"
  [ -z "$check" ] || "$check" "$name" "$TMP/$name.log"
  local victim; victim=$(rank_pid $launcher 2)
  [ -n "$victim" ] || fail "$name: could not find rank 2's pid"
  local t0; t0=$(date +%s.%N)
  kill -$sig "$victim"
  local rc=0
  for _ in $(seq 1 300); do kill -0 $launcher 2>/dev/null || break; sleep 0.1; done
  if kill -0 $launcher 2>/dev/null; then kill -9 $launcher; cat "$TMP/$name.log"; fail "$name: launcher still running after 30 s"; fi
  wait $launcher; rc=$?
  local dt; dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  echo "$name: launcher exited $rc after ${dt}s"
  [ $rc -ne 0 ] || fail "$name: launcher exited 0"
  grep -q "$want" "$TMP/$name.log" || { tail -n 20 "$TMP/$name.log"; fail "$name: no message naming rank 2 ('$want')"; }
  # each surviving rank reported the error itself
  local n_err; n_err=$(grep -c "mtrain: error:" "$TMP/$name.log" || true)
  echo "$name: $n_err ranks reported an error; e.g.: $(grep -m1 'mtrain: error:' "$TMP/$name.log" | cut -c1-200)"
  [ "$n_err" -ge 3 ] || { tail -n 20 "$TMP/$name.log"; fail "$name: expected the 3 surviving ranks to report the failure"; }
  sleep 0.5
  local left; left=$(marked_pids "$mark")
  if [ -n "$left" ]; then
    ps -o pid,stat,args -p $left
    kill -KILL $left 2>/dev/null # this test's own ranks (found by their marker), by pid
    fail "$name: ranks left running"
  fi
  return 0
}

# --- equivalence against a serial run (tp_equivalence.sh, pp_equivalence.sh) ---
worst() { # worst FIELD REF NEW -> worst relative difference, and the count of lines compared
  paste <(json_field "$2" "$1") <(json_field "$3" "$1") | awk '
    { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > w) w = r; n++ }
    END { printf "%.2e %d", w, n }'
}
# compare REF NEW NAME ITERS LOSS_TOL GRAD_NORM_TOL: NEW has ITERS lm_loss and grad_norm lines and
# each is within the relative tolerance of REF's
compare() {
  local iters=$4 ltol=$5 gtol=$6 wl nl wg ng
  read -r wl nl <<<"$(worst lm_loss "$1" "$2")"
  read -r wg ng <<<"$(worst grad_norm "$1" "$2")"
  echo "$3: $nl iterations, worst relative difference: loss $wl, grad norm $wg"
  [ "$nl" -eq $iters ] && [ "$ng" -eq $iters ] || fail "$3: expected $iters iterations, got $nl"
  awk -v l="$wl" -v g="$wg" -v lt="$ltol" -v gt="$gtol" 'BEGIN { exit !(l + 0 <= lt + 0 && g + 0 <= gt + 0) }' || fail "$3 differs from the serial run"
}
# equiv_run REF NAME RANKS FLAG SIZE REPORTED ARGS...: NAME launched on RANKS ranks with FLAG SIZE
# (e.g. --tensor-model-parallel-size 2), its log reporting REPORTED (e.g. "tp 2"), its losses and
# grad norms those of the serial run REF over ITERS iterations (relative 1e-4 / 1e-3)
equiv_run() {
  local ref=$1 name=$2 n=$3 flag=$4 size=$5 reported=$6; shift 6
  launched "$name" "$n" "$@" "$flag" "$size"
  grep -q "$reported" "$TMP/$name.log" || fail "$name: the run did not report $reported"
  compare "$TMP/$ref.jsonl" "$TMP/$name.jsonl" "$name" $ITERS 1e-4 1e-3
}
# variant_base: ITERS and BASE of the layer-variant cases of the equivalence scripts: 8 iterations at
# lr 0.01 without warmup, so that a wrong gradient of a small tensor (a qk norm weight) shows
variant_base() {
  ITERS=8
  BASE=(--train-iters $ITERS --lr 0.01 --lr-warmup-iters 0 --micro-batch-size 2 --set logging.interval=1
    --set logging.eval_interval=0)
}
launched() { # launched NAME RANKS ARGS...: mtrain launch -n RANKS, "${BASE[@]}" appended, metrics to $TMP/NAME.jsonl
  local name=$1 n=$2; shift 2
  "$MTRAIN" launch -n "$n" -- "$@" "${BASE[@]}" --metrics "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 ||
    { tail -n 30 "$TMP/$name.log"; fail "$name run failed"; }
}
serial() { # serial NAME ARGS...: one process, "${BASE[@]}" appended, metrics to $TMP/NAME.jsonl
  local name=$1; shift
  "$MTRAIN" "$@" "${BASE[@]}" --metrics "$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 || { cat "$TMP/$name.log"; fail "$name run failed"; }
}
# bg_serial [--variant] NAME ARGS...: serial NAME in the background on one thread (with --variant: variant_base's
# BASE); two such runs fill 2 cores better than one run on 2 threads. wait_serials: each must have passed.
SERIALS=()
bg_serial() {
  if [ "$1" = --variant ]; then shift; ( variant_base; serial "$@" --threads 1 ) & else ( serial "$@" --threads 1 ) & fi
  SERIALS+=($!)
}
wait_serials() {
  local p bad=0
  for p in "${SERIALS[@]}"; do wait "$p" || bad=1; done
  SERIALS=()
  [ $bad -eq 0 ] || fail "a serial reference run failed"
}
