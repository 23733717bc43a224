#!/usr/bin/env bash
# test/e2e/bootstrap_launchers.sh — the rank bootstrap under every way mtrain is launched, with
# `mtrain bootstrap-check` (bootstrap, allgather (rank, size, local rank/size, pid, host), check
# that every rank sees ranks 0..N-1 exactly once, print "bootstrap-check: kind=K rank=R size=N
# local=L/LN ok"), N=4:
#   (a) mtrain launch -n 4          (b) mpirun -n 4 (OpenMPI)
#   (c) srun --mpi=pmix -n 4 on a one-machine Slurm this test starts and stops (scripts/slurm/)
#   (d) env:// by hand: 4 processes with RANK, WORLD_SIZE, LOCAL_*, MASTER_ADDR, MASTER_PORT;
#       and torchrun --no_python itself when python3-torch happens to be installed
#   (e) nothing set: kind=single size=1
# and the launcher's failure handling: a rank exiting 5 (launcher exits 5 naming it), kill -9 of
# a rank (also while the others wait in a PMIx fence), SIGTERM to the launcher; each time no
# rank may be left running and the launcher's private PMIx tmpdir must be gone. The kill -9 cases
# run with MT_LAUNCH_PEER_GRACE_S=1: where the others sleep (g1) they cannot notice the lost rank,
# so the launcher SIGTERMs them once its peer grace is over; 1 s instead of the default 10 s takes
# the same path (nothing here asserts the grace's length).
# A launcher that is not installed is skipped (exit 77 at the end if all else passed): make
# test installs them (scripts/install-deps.sh). Run from the repo root; MTRAIN defaults to ./mtrain.
set -u
MTRAIN="${MTRAIN:-./mtrain}"
if [ ! -x "$MTRAIN" ]; then echo "skip: $MTRAIN not built"; exit 77; fi
MTRAIN="$(cd "$(dirname "$MTRAIN")" && pwd)/$(basename "$MTRAIN")"
if ! "$MTRAIN" bootstrap-check --help >/dev/null 2>&1; then
  echo "FAIL: '$MTRAIN bootstrap-check' is not wired into cmd/mtrain.c"; exit 1
fi
REPO="$(pwd)"
source test/proc_lib.sh
tmp=$(mktemp -d /tmp/mt_e2e_bootstrap.XXXXXX)
export TMPDIR="$tmp/launch-tmp" # mtrain launch makes its private PMIx dir here: must end empty
mkdir -p "$TMPDIR"
# a private copy: a concurrent `make` relinking ./mtrain must not pull the binary from under the ranks
cp "$MTRAIN" "$tmp/mtrain" && MTRAIN="$tmp/mtrain"
slurm_up=""
bg_pids=()
cleanup() {
  for p in "${bg_pids[@]:-}"; do [ -n "$p" ] && kill -KILL "$p" 2>/dev/null; done
  for p in $(marked "$tmp/"); do kill -KILL "$p" 2>/dev/null; done # ranks of (f)-(h), by pid
  [ -n "$slurm_up" ] && "$REPO/scripts/slurm/stop-local.sh" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
# the ranks must not inherit a launcher from whoever runs the tests
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT MT_BOOTSTRAP MT_STORE_PORT
for v in $(env | grep -oE '^PMIX_[A-Z0-9_]+' | grep -v '^PMIX_MCA_'); do unset "$v"; done

fails=0; skips=()
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
skip() { echo "SKIP: $*"; skips+=("$1"); }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f", b-a}'; }
timings=()

# check_ranks FILE KIND N PREFIXED: FILE holds exactly N ok lines of kind KIND, one per rank
# 0..N-1, each with size N and local R/N (one machine); PREFIXED=1: lines carry "[rR] " of
# their own rank (mtrain launch)
check_ranks() {
  local f=$1 kind=$2 n=$3 pre=$4 r p=""
  local got
  got=$(grep -cE "bootstrap-check: kind=$kind rank=[0-9]+ size=$n local=[0-9]+/$n ok$" "$f")
  [ "$got" = "$n" ] || { echo "  expected $n ok lines of kind=$kind, got $got"; return 1; }
  for r in $(seq 0 $((n - 1))); do
    [ "$pre" = 1 ] && p="\\[r$r\\] "
    grep -qE "^${p}bootstrap-check: kind=$kind rank=$r size=$n local=$r/$n ok$" "$f" ||
      { echo "  no line for rank $r (prefix '${p}')"; return 1; }
  done
}
show() { sed 's/^/  | /' "$@" | tail -n 30; }
# a marker in the environment of the launcher, which its ranks inherit (MT_E2E_MARK=$tmp/MARK:
# unique to this run, and the test shell itself does not export it), finds leftovers without
# touching anything else on a shared machine; nothing is looked up or killed by name. MARK is also
# the ranks' --timeout (long: it never fires).
new_mark() { MARK=$((3000 + RANDOM % 50000)); }
marked() { grep -lzF ${2:-} -- "MT_E2E_MARK=$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true; }
leftovers() { marked "$tmp/$MARK" -x; }
tmpdir_clean() { [ -z "$(ls -A "$TMPDIR")" ]; }

# ---- (a) mtrain launch -n 4 ----
t0=$(now)
timeout 60 "$MTRAIN" launch -n 4 -- bootstrap-check >"$tmp/a.out" 2>"$tmp/a.err"; rc=$?
dt=$(since "$t0"); timings+=("mtrain launch -n 4: ${dt} s")
if [ $rc -eq 0 ] && check_ranks "$tmp/a.out" pmix 4 1; then ok "(a) mtrain launch -n 4: 4 ranks, kind=pmix, ${dt} s"
else fail "(a) mtrain launch -n 4 exited $rc"; show "$tmp/a.out" "$tmp/a.err"; fi
tmpdir_clean || fail "(a) mtrain launch left $(ls "$TMPDIR") in TMPDIR"
# no "--", and --no-prefix: the launcher stops at its first unknown argument
timeout 60 "$MTRAIN" launch -n 2 --no-prefix bootstrap-check >"$tmp/a2.out" 2>"$tmp/a2.err"; rc=$?
if [ $rc -eq 0 ] && check_ranks "$tmp/a2.out" pmix 2 0; then ok "(a) mtrain launch -n 2 --no-prefix without --"
else fail "(a) mtrain launch -n 2 --no-prefix exited $rc"; show "$tmp/a2.out" "$tmp/a2.err"; fi
"$MTRAIN" launch bootstrap-check >/dev/null 2>"$tmp/a3.err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "-n N" "$tmp/a3.err" && ok "(a) launch without -n: usage error" ||
  fail "(a) launch without -n exited $rc: $(cat "$tmp/a3.err")"

# ---- (b) mpirun -n 4 ----
if command -v mpirun >/dev/null; then
  root_flags=(); [ "$(id -u)" = 0 ] && root_flags=(--allow-run-as-root)
  t0=$(now)
  timeout 60 mpirun "${root_flags[@]}" --oversubscribe -n 4 "$MTRAIN" bootstrap-check >"$tmp/b.out" 2>"$tmp/b.err"; rc=$?
  dt=$(since "$t0"); timings+=("mpirun -n 4: ${dt} s")
  if [ $rc -eq 0 ] && check_ranks "$tmp/b.out" pmix 4 0; then ok "(b) mpirun -n 4: 4 ranks, kind=pmix, ${dt} s"
  else fail "(b) mpirun -n 4 exited $rc"; show "$tmp/b.out" "$tmp/b.err"; fi
else
  skip "mpirun" "(b) mpirun not installed (Debian openmpi-bin)"
fi

free_port() { # a port nobody listens on, never the no-rank-0 case's (nr0_port)
  local p i hex
  for i in $(seq 1 50); do
    p=$((20000 + RANDOM % 40000)); hex=$(printf ':%04X ' "$p")
    [ "$p" = "${nr0_port:-}" ] && continue
    if ! grep -qi "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null; then echo "$p"; return; fi
  done
  echo 29500
}
# (d)'s "no rank 0" case only waits out its 2 s --timeout, so it runs in the background from here
# on, overlapping (c); its status and message are checked in (d), where they always were.
nr0_port=$(free_port)
t_nr0=$(now)
( RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$nr0_port "$MTRAIN" bootstrap-check --timeout 2 >/dev/null 2>"$tmp/d-err3"
  echo $? >"$tmp/d-rc3"; since "$t_nr0" >"$tmp/d-dt3" ) &
nr0_pid=$!; bg_pids+=($nr0_pid)

# ---- (c) srun --mpi=pmix -n 4 on a one-machine Slurm ----
if [ "$(id -u)" != 0 ]; then
  skip "srun" "(c) the one-machine Slurm needs root"
elif ! command -v slurmctld >/dev/null || ! command -v srun >/dev/null; then
  skip "srun" "(c) Slurm not installed (Debian slurmctld slurmd slurm-client)"
else
  exec 9>/tmp/mtrain-slurm.lock # other test runs that want Slurm take turns
  if ! flock -w 300 9; then
    fail "(c) another run held /tmp/mtrain-slurm.lock for 300 s"
  else
    t0=$(now)
    slurm_up=1
    if "$REPO/scripts/slurm/start-local.sh" >"$tmp/c-start.out" 2>&1; then
      dt_start=$(since "$t0"); timings+=("Slurm start (slurmctld + slurmd, node idle): ${dt_start} s")
      export SLURM_CONF=/tmp/mtrain-slurm/slurm.conf
      if srun --mpi=list 2>&1 | grep -q pmix; then ok "(c) srun --mpi=list shows pmix"
      else fail "(c) srun --mpi=list lacks pmix: $(srun --mpi=list 2>&1 | tr '\n' ' ')"; fi
      t0=$(now)
      timeout 60 srun --mpi=pmix -n 4 "$MTRAIN" bootstrap-check >"$tmp/c.out" 2>"$tmp/c.err"; rc=$?
      dt=$(since "$t0"); timings+=("srun --mpi=pmix -n 4: ${dt} s")
      if [ $rc -eq 0 ] && check_ranks "$tmp/c.out" pmix 4 0; then ok "(c) srun --mpi=pmix -n 4: 4 ranks, kind=pmix, ${dt} s"
      else fail "(c) srun --mpi=pmix -n 4 exited $rc"; show "$tmp/c.out" "$tmp/c.err" /tmp/mtrain-slurm/slurmd.log; fi
      # a failing task: srun reports it and the node comes back idle
      timeout 60 srun --mpi=pmix -n 4 "$MTRAIN" bootstrap-check --fail-rank 1 --fail-code 5 >"$tmp/c2.out" 2>"$tmp/c2.err"; rc=$?
      [ $rc -ne 0 ] && grep -q "task 1: Exited with exit code 5" "$tmp/c2.err" &&
        ok "(c) srun with a rank exiting 5: srun exits $rc and names task 1" ||
        { fail "(c) srun with a failing rank exited $rc"; show "$tmp/c2.err"; }
      unset SLURM_CONF
    else
      fail "(c) scripts/slurm/start-local.sh failed"; show "$tmp/c-start.out"
    fi
    t0=$(now)
    "$REPO/scripts/slurm/stop-local.sh" >/dev/null 2>&1
    slurm_up=""
    timings+=("Slurm stop: $(since "$t0") s")
    # the daemons and their slurmstepd carry start-local.sh's marker in their environment
    grep -lzx -- "MT_SLURM_LOCAL_DIR=/tmp/mtrain-slurm" /proc/[0-9]*/environ 2>/dev/null | grep -q . &&
      fail "(c) Slurm processes still running after stop-local.sh"
    [ -e /tmp/mtrain-slurm ] && fail "(c) stop-local.sh left /tmp/mtrain-slurm"
    flock -u 9
  fi
fi

# ---- (d) env:// by hand ----
port=$(free_port)
t0=$(now)
pids=()
for r in 3 2 1 0; do # rank 0 last: the others must retry until its store listens
  RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 60 "$MTRAIN" bootstrap-check >"$tmp/d$r.out" 2>"$tmp/d$r.err" &
  pids+=($!)
done
rcs=""
for p in "${pids[@]}"; do wait "$p"; rcs="$rcs $?"; done
dt=$(since "$t0"); timings+=("env:// 4 processes: ${dt} s")
cat "$tmp"/d[0-3].out >"$tmp/d.out"
if [ "$rcs" = " 0 0 0 0" ] && check_ranks "$tmp/d.out" env 4 0; then ok "(d) env:// 4 ranks (port $port), kind=env, ${dt} s"
else fail "(d) env:// exit codes:$rcs"; show "$tmp"/d[0-3].out "$tmp"/d[0-3].err; fi
# LOCAL_* unset: derived from the host names; MASTER_ADDR a name
port=$(free_port)
pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=localhost MASTER_PORT=$port timeout 60 "$MTRAIN" bootstrap-check >"$tmp/e$r.out" 2>&1 &
  pids+=($!)
done
rcs=""; for p in "${pids[@]}"; do wait "$p"; rcs="$rcs $?"; done
cat "$tmp"/e[01].out >"$tmp/e.out"
[ "$rcs" = " 0 0" ] && check_ranks "$tmp/e.out" env 2 0 && ok "(d) env:// without LOCAL_RANK/LOCAL_WORLD_SIZE" ||
  { fail "(d) env:// without LOCAL_*:$rcs"; show "$tmp/e.out"; }
# clear errors naming the variable
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=abc "$MTRAIN" bootstrap-check >/dev/null 2>"$tmp/d-err1"; rc=$?
[ $rc -ne 0 ] && grep -q "MASTER_PORT=abc is not a port number" "$tmp/d-err1" && ok "(d) MASTER_PORT=abc named" ||
  fail "(d) MASTER_PORT=abc: exit $rc, $(cat "$tmp/d-err1")"
RANK=1 WORLD_SIZE=2 MASTER_PORT=$port "$MTRAIN" bootstrap-check >/dev/null 2>"$tmp/d-err2"; rc=$?
[ $rc -ne 0 ] && grep -q "MASTER_ADDR is not set" "$tmp/d-err2" && ok "(d) missing MASTER_ADDR named" ||
  fail "(d) missing MASTER_ADDR: exit $rc, $(cat "$tmp/d-err2")"
# no rank 0 (started in the background before (c)): a clear error once its 2 s timeout is over
wait "$nr0_pid"; rc=$(cat "$tmp/d-rc3" 2>/dev/null || echo "?"); dt=$(cat "$tmp/d-dt3" 2>/dev/null || echo "?")
[ $rc -ne 0 ] && grep -q "could not connect to rank 0" "$tmp/d-err3" && ok "(d) no rank 0: clear error after the 2 s timeout (${dt} s)" ||
  fail "(d) no rank 0: exit $rc, $(cat "$tmp/d-err3")"

# torchrun itself, when Debian's python3-torch is installed (optional: not in install-deps, 170
# packages). Its agent serves its own store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True),
# so mtrain's store moves to MASTER_PORT + 1. Debian's torch 1.13 torchrun fails under python
# 3.11 in to_map(redirects=None); the wrapper below patches only that.
if /usr/bin/python3 -c 'import torch.distributed.run' 2>/dev/null; then
  cat >"$tmp/torchrun.py" <<'PY'
import sys
import torch.distributed.elastic.multiprocessing as mp
import torch.distributed.elastic.multiprocessing.api as api
orig = api.to_map
def to_map(v, n):
    return {i: api.Std.NONE for i in range(n)} if v is None else orig(v, n)
api.to_map = mp.to_map = to_map
from torch.distributed.run import main
sys.exit(main())
PY
  t0=$(now)
  TMPDIR="$tmp" timeout 120 /usr/bin/python3 "$tmp/torchrun.py" --no_python --nproc_per_node 4 --master_port "$(free_port)" \
    "$MTRAIN" bootstrap-check >"$tmp/t.out" 2>"$tmp/t.err"; rc=$?
  dt=$(since "$t0"); timings+=("torchrun --no_python --nproc_per_node 4: ${dt} s")
  if [ $rc -eq 0 ] && check_ranks "$tmp/t.out" env 4 0; then ok "(d) torchrun --no_python --nproc_per_node 4: kind=env, ${dt} s"
  else fail "(d) torchrun exited $rc"; show "$tmp/t.out" "$tmp/t.err"; fi
else
  echo "note: (d) torchrun not tried (Debian python3-torch not installed; optional)"
fi

# ---- (e) nothing set: one rank ----
"$MTRAIN" bootstrap-check >"$tmp/s.out" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^bootstrap-check: kind=single rank=0 size=1 local=0/1 ok$" "$tmp/s.out" &&
  ok "(e) no launcher: kind=single size=1" || { fail "(e) single exited $rc"; show "$tmp/s.out"; }

# ---- (f) a rank exits 5 under mtrain launch; the others exit 3 (MT_EXIT_PEER: a peer failed first) or are
# stopped, and whichever the launcher reaps first, it names rank 2 and exits with its status (before
# MT_EXIT_PEER, a loaded machine had it name rank 0 or 1 in 4 of 25 tries) ----
new_mark
t0=$(now)
MT_E2E_MARK="$tmp/$MARK" timeout 60 "$MTRAIN" launch -n 4 -- bootstrap-check --timeout $MARK --fail-rank 2 --fail-code 5 >"$tmp/f.out" 2>"$tmp/f.err"; rc=$?
dt=$(since "$t0"); timings+=("launch, rank 2 exits 5 -> launcher exits: ${dt} s")
if [ $rc -eq 5 ] && grep -q "^mtrain launch: rank 2 exited with status 5" "$tmp/f.err"; then
  ok "(f) rank 2 exits 5: launcher exits 5 and names rank 2 (${dt} s)"
else fail "(f) rank 2 exits 5: launcher exited $rc"; show "$tmp/f.out" "$tmp/f.err"; fi
sleep 0.2; [ -z "$(leftovers)" ] || fail "(f) ranks left running: $(leftovers)"
tmpdir_clean || fail "(f) the failure path left $(ls "$TMPDIR") in TMPDIR"

# ---- (g) kill -9 of a rank under mtrain launch (g1: all ranks sleeping; g2: the others in a fence) ----
for variant in g1 g2; do
  new_mark
  extra=(--sleep 30); [ $variant = g2 ] && extra=(--sleep 30 --sleep-rank 0)
  MT_E2E_MARK="$tmp/$MARK" MT_LAUNCH_PEER_GRACE_S=1 "$MTRAIN" launch -n 4 -- bootstrap-check --timeout $MARK "${extra[@]}" \
    >"$tmp/$variant.out" 2>"$tmp/$variant.err" &
  lp=$!; bg_pids+=($lp)
  if ! wait_lines "$tmp/$variant.out" 4 30; then fail "($variant) ranks did not start"; show "$tmp/$variant.out" "$tmp/$variant.err"; continue; fi
  ranks=($(pgrep -P $lp))
  victim_idx=1; [ $variant = g2 ] && victim_idx=0 # g2: rank 0 sleeps, 1..3 wait in the fence; kill rank 0
  victim=${ranks[$victim_idx]:-}
  [ -n "$victim" ] || { fail "($variant) no rank processes under the launcher"; continue; }
  t0=$(now)
  kill -KILL "$victim"
  wait_exit $lp 15
  dt=$(since "$t0"); timings+=("kill -9 of a rank ($variant) -> launcher exits: ${dt} s")
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "was killed by signal 9" "$tmp/$variant.err"; then
    ok "($variant) kill -9 of rank $victim_idx: launcher exits $rc after ${dt} s and names it"
  else fail "($variant) kill -9: launcher status $rc after ${dt} s"; show "$tmp/$variant.out" "$tmp/$variant.err"; fi
  sleep 0.2; [ -z "$(leftovers)" ] || fail "($variant) ranks left running: $(leftovers)"
  tmpdir_clean || fail "($variant) left $(ls "$TMPDIR") in TMPDIR"
done

# ---- (h) SIGTERM to the launcher stops every rank ----
new_mark
MT_E2E_MARK="$tmp/$MARK" "$MTRAIN" launch -n 4 -- bootstrap-check --timeout $MARK --sleep 30 >"$tmp/h.out" 2>"$tmp/h.err" &
lp=$!; bg_pids+=($lp)
if wait_lines "$tmp/h.out" 4 30; then
  t0=$(now)
  kill -TERM $lp
  wait_exit $lp 15
  dt=$(since "$t0"); timings+=("SIGTERM to the launcher -> all gone: ${dt} s")
  [ $rc -eq 143 ] && ok "(h) SIGTERM: launcher exits 143 after ${dt} s" ||
    { fail "(h) SIGTERM: launcher status $rc"; show "$tmp/h.err"; }
  sleep 0.2; [ -z "$(leftovers)" ] || fail "(h) ranks left running after SIGTERM: $(leftovers)"
  tmpdir_clean || fail "(h) left $(ls "$TMPDIR") in TMPDIR"
else
  fail "(h) ranks did not start"; show "$tmp/h.out" "$tmp/h.err"
fi

echo "timings:"
for t in "${timings[@]}"; do echo "  $t"; done
if [ $fails -gt 0 ]; then echo "$fails check(s) failed"; exit 1; fi
if [ ${#skips[@]} -gt 0 ]; then echo "all checks passed; skipped: ${skips[*]}"; exit 77; fi
echo "all checks passed"
