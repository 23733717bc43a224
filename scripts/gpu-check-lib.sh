# scripts/gpu-check-lib.sh — the body of scripts/gpu-check.sh (sourced by it, never run alone):
# the report, summary and log tarball; finding the CUDA toolkit, its libraries and the pip
# wheels' copies; the plumbing checks; the GPU steps; gc_main. gpu-check.sh defines the paths,
# the runs' arguments and MODE before sourcing this.

# ---- helpers ----
now() { date +%s; }
elapsed() { echo $(( $(now) - T_START )); }
left() { echo $(( BUDGET_S - $(elapsed) )); }
# cap CAP_S: seconds a step may take: its cap, cut to the budget left minus 15 s for the report
cap() {
  local l=$(( $(left) - 15 ))
  [ "$1" -lt "$l" ] && echo "$1" || echo "$l"
}
jstr() { # a JSON string literal of $1 (one line; quotes, backslashes and control characters escaped)
  printf '%s' "$1" | tr '\n\t\r' '   ' | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$/"/'
  [ -n "$1" ] || printf '""'
}
jnum() { [[ "$1" =~ ^-?[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$ ]] && printf '%s' "$1" || printf 'null'; }
# jget FILE KEY: the KEY values of every line of a JSON-lines file (mtrain's and Python's spacing)
jget() { grep -o "\"$2\": *[^,}]*" "$1" 2>/dev/null | sed 's/^[^:]*: *//; s/^"//; s/"$//'; }
median_after() { # median_after FILE KEY SKIP: median of KEY over the lines after the first SKIP
  jget "$1" "$2" | tail -n +$(( $3 + 1 )) | grep -v null | sort -g |
    awk '{v[NR]=$1} END {if (NR) printf "%.6g", v[int((NR+1)/2)]}'
}
loss_verdict() { # loss_verdict GPU_TXT CPU_TXT N: "OK|BAD last mean_last10 max n" from two loss columns
  paste "$1" "$2" | awk -v tol="$LOSS_TOL" -v want="$3" '
    { d=$1-$2; if (d<0) d=-d; diff[NR]=d; if (d>mx) mx=d; if ($1 !~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/) bad=1 }
    END {
      s=0; k=0; for (i=NR-9; i<=NR; i++) if (i>=1) { s+=diff[i]; k++ }
      m = k ? s/k : 1e9; last = NR ? diff[NR] : 1e9
      ok = (NR == want && !bad && last < tol && m < tol)
      printf "%s %.5f %.5f %.5f %d", ok ? "OK" : "BAD", last, m, mx, NR }'
}
throughput_json() { # throughput_json METRICS_JSONL LOG: the figures of an mtrain run as JSON members
  local f=$1 tps ms tf mfu peak mem n
  tps=$(median_after "$f" tokens_per_s $WARMUP); ms=$(median_after "$f" ms_per_iter $WARMUP)
  tf=$(median_after "$f" tflops $WARMUP); mfu=$(median_after "$f" mfu $WARMUP)
  peak=$(awk -v t="$tf" -v m="$mfu" 'BEGIN{if (m > 0) printf "%.0f", t/m}')
  mem=$(grep -o 'peak memory [0-9.]* [GM]iB' "$2" | tail -n 1)
  n=$(( $(jget "$f" tokens_per_s | wc -l) - WARMUP ))
  printf ', "iterations_timed": %s, "tokens_per_s": %s, "ms_per_iter": %s, "tflops_per_gpu": %s, "mfu": %s, "hfu": %s, "recompute": "none", "peak_tflops": %s, "memory": %s' \
    "$n" "$(jnum "$tps")" "$(jnum "$ms")" "$(jnum "$tf")" "$(jnum "$mfu")" "$(jnum "$mfu")" "$(jnum "$peak")" "$(jstr "$mem")"
}

N_FAIL=0
STEPS_JSON=""    # "name": {...} entries, comma separated
CHECKS_JSON=""
SUMMARY_ROWS=""  # "name<TAB>status<TAB>figures" lines
add_step() { # add_step NAME STATUS SECONDS DETAIL_JSON [FIGURES]: one step's outcome, then the outputs rewritten
  [ "${2%%:*}" = fail ] && N_FAIL=$((N_FAIL + 1))
  printf '%-20s %s (%ss)\n' "$1" "$2" "$3"
  STEPS_JSON="$STEPS_JSON${STEPS_JSON:+,
    }$(jstr "$1"): {\"status\": $(jstr "$2"), \"seconds\": $3$4}"
  SUMMARY_ROWS="$SUMMARY_ROWS$1	$2	${5:-}
"
  write_outputs
}
add_check() { # add_check NAME STATUS DETAIL: a plumbing check (both modes)
  [ "${2%%:*}" = fail ] && N_FAIL=$((N_FAIL + 1))
  printf '  check %-22s %s%s\n' "$1" "$2" "${3:+ ($3)}"
  CHECKS_JSON="$CHECKS_JSON${CHECKS_JSON:+,
    }$(jstr "$1"): {\"status\": $(jstr "$2"), \"detail\": $(jstr "${3:-}")}"
}

MACHINE_READ=0
write_report() { # the machine's facts are read once (nvcc --version alone takes a second)
  local result
  if [ $MACHINE_READ -eq 0 ]; then
    MACHINE_READ=1; gpu=""; driver=""; nvcc_v=""; glibc_v=$(ldd --version 2>/dev/null | head -n 1)
    if command -v nvidia-smi >/dev/null 2>&1; then
      gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
      driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
    fi
    [ -n "$NVCC" ] && nvcc_v=$("$NVCC" --version 2>/dev/null | grep -o 'release [0-9.]*' | head -n 1)
  fi
  if [ $N_FAIL -eq 0 ]; then result=pass; else result=fail; fi
  local tmp="$REPORT.tmp.$$"
  mkdir -p "$(dirname "$REPORT")"
  cat >"$tmp" <<EOF
{
  "schema": "mtrain-gpu-check/2",
  "mode": $(jstr "$MODE"),
  "result": $(jstr "$result"),
  "complete": $1,
  "failures": $N_FAIL,
  "started_utc": $(jstr "$(date -u -d @"$T_START" +%Y-%m-%dT%H:%M:%SZ)"),
  "elapsed_s": $(elapsed),
  "budget_s": $BUDGET_S,
  "essential_s": $ESSENTIAL_S,
  "essential_done_s": ${ESSENTIAL_DONE_S:-null},
  "kit": $(jstr "$([ $KIT -eq 1 ] && head -n 1 "$ROOT/MANIFEST" 2>/dev/null || echo "source tree $ROOT")"),
  "machine": {"gpu": $(jstr "$gpu"), "driver": $(jstr "$driver"), "nvcc": $(jstr "${nvcc_v:-not found}"),
              "arch": $(jstr "${ARCH_USED:-}"), "cpus": $(nproc 2>/dev/null || echo 0),
              "glibc": $(jstr "$glibc_v"),
              "libraries": {"cudart": $(jstr "$LIB_CUDART"), "cublasLt": $(jstr "$LIB_CUBLASLT"), "nccl": $(jstr "$LIB_NCCL"),
                            "cudnn": $(jstr "$LIB_CUDNN"), "compute_sanitizer": $(jstr "$SANITIZER")}},
  "conventions": {"mfu": "model FLOPs without recomputation / (time x dense bf16 peak of the device), the same count for mtrain and the peer",
                  "loss_tolerance_nats": $LOSS_TOL, "hf_logprob_tolerance": $HF_TOL,
                  "parity_tolerances": "test/ops/cuda_parity_check.h (nmse, per op)"},
  "checks": {
    $CHECKS_JSON
  },
  "steps": {
    $STEPS_JSON
  }
}
EOF
  mv "$tmp" "$REPORT"
}
write_summary() { # the table of every figure: printed last, and in OUT_DIR
  { echo "== mtrain gpu-check ($MODE): $([ $N_FAIL -eq 0 ] && echo pass || echo "FAIL, $N_FAIL failure(s)"), $(elapsed) s of $BUDGET_S; gpu ${GPU_NAME:-none}"
    printf '%s' "$SUMMARY_ROWS" | awk -F'\t' '{st=$2; if (length(st) > 58) st=substr(st, 1, 55) "..."; printf "%-20s %-58s %s\n", $1, st, $3}'
  } >"$SUMMARY.tmp" && mv "$SUMMARY.tmp" "$SUMMARY"
}
write_outputs() { # report (complete: false until the end), summary, log tarball: all under OUT_DIR
  write_report "${1:-false}"
  write_summary
  tar -C "$WORK" -czf "$TARBALL.tmp" logs 2>/dev/null && mv "$TARBALL.tmp" "$TARBALL"
}
finish() { # finish: the final outputs, the summary table as the last lines printed, the exit status
  write_outputs true
  echo "gpu-check: report $REPORT, logs $TARBALL"
  cat "$SUMMARY"
  [ $N_FAIL -eq 0 ] && exit 0 || exit 1
}

# ---- the machine: libraries of the kit, the CUDA toolkit, the pip wheels' NVIDIA libraries ----
NVCC=""; CUDA_HOME_FOUND=""; SANITIZER=""; LIB_CUDART=""; LIB_CUBLASLT=""; LIB_NCCL=""; LIB_CUDNN=""; NV_WHEEL_DIRS=""
INC_DIRS=""
ORIG_LDP="${LD_LIBRARY_PATH:-}" # Python (the peer, the transformers check) runs with the machine's own
pyrun() { env LD_LIBRARY_PATH="$ORIG_LDP" "$PY" "$@"; }
kit_libraries() { # LD_LIBRARY_PATH for the kit's binaries: lib/, and lib/runtime/ (the GCC runtime)
  # only where the machine's own copies are missing or do not load
  [ $KIT -eq 1 ] || { add_check host-libraries pass "source tree: the system's libraries"; return; }
  local saved="${LD_LIBRARY_PATH:-}"
  export LD_LIBRARY_PATH="$ROOT/lib${saved:+:$saved}"
  local note="lib/ (the Debian libraries of the kit)" miss
  starts() { ! ldd "$MT" "$TBIN"/test_* 2>&1 | grep -q 'not found' && "$MT" --version >"$LOGS/mtrain-version.log" 2>&1; }
  if ! starts; then
    miss=$(ldd "$MT" 2>&1 | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
    [ -n "$miss" ] || miss="$(grep -o 'lib[a-z]*\.so[.0-9]*' "$LOGS/mtrain-version.log" | head -n 1) (does not load) "
    export LD_LIBRARY_PATH="$ROOT/lib:$ROOT/lib/runtime${saved:+:$saved}"
    note="$note + lib/runtime/ for $miss"
  fi
  if ! starts; then add_check host-libraries fail "bin/mtrain does not start even with the libraries of the kit: $(ldd "$MT" 2>&1 | grep 'not found' | head -n 3 | tr '\n' ' ')$(head -c 300 "$LOGS/mtrain-version.log")"
  else add_check host-libraries pass "$note; $(head -n 1 "$LOGS/mtrain-version.log")"; fi
}
find_cuda() {
  NVCC="$(command -v nvcc 2>/dev/null || true)"
  for p in /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc; do [ -n "$NVCC" ] || { [ -x "$p" ] && NVCC=$p; }; done
  [ -n "$NVCC" ] && CUDA_HOME_FOUND=$(dirname "$(dirname "$(readlink -f "$NVCC")")")
  local h="${CUDA_HOME_FOUND:-/usr/local/cuda}"
  SANITIZER="$(command -v compute-sanitizer 2>/dev/null || true)"
  for p in "$h/bin/compute-sanitizer" "$h/compute-sanitizer/compute-sanitizer"; do [ -n "$SANITIZER" ] || { [ -x "$p" ] && SANITIZER=$p; }; done
  # the pip wheels' NVIDIA folders (nvidia-nccl-cu13, nvidia-cudnn-cu13, nvidia-cublas, ...): through
  # python's own view of the namespace package, else a glob over the usual site-packages places
  NV_WHEEL_DIRS=$(pyrun -c 'import nvidia, sys; print("\n".join(nvidia.__path__))' 2>/dev/null || true)
  [ -n "$NV_WHEEL_DIRS" ] || NV_WHEEL_DIRS=$(ls -d /opt/*/.venv/lib/python3*/site-packages/nvidia /usr/local/lib/python3*/dist-packages/nvidia \
    /usr/lib/python3/dist-packages/nvidia 2>/dev/null || true)
  local dirs=("$h/lib64" "$h/targets/x86_64-linux/lib" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu) w
  for w in $NV_WHEEL_DIRS; do dirs+=("$w"/*/lib); done
  find_lib() { local d f; for d in "${dirs[@]}"; do for f in "$d"/$1; do [ -f "$f" ] && { echo "$f"; return; }; done; done; }
  LIB_CUDART=$(find_lib 'libcudart.so.[0-9]*')
  LIB_CUBLASLT=$(find_lib 'libcublasLt.so.[0-9]*')
  LIB_NCCL=$(find_lib 'libnccl.so.[0-9]*')
  LIB_CUDNN=$(find_lib 'libcudnn.so.[0-9]*')
  INC_DIRS="$h/include $h/targets/x86_64-linux/include"
  [ "$h" = /usr/local/cuda ] || INC_DIRS="$INC_DIRS /usr/local/cuda/include"
  for w in $NV_WHEEL_DIRS; do INC_DIRS="$INC_DIRS $(ls -d "$w"/*/include 2>/dev/null | tr '\n' ' ')"; done
  add_check nvcc "$([ -n "$NVCC" ] && echo pass || echo "pass: absent")" "${NVCC:-not on PATH nor in /usr/local/cuda*: the prebuilt module of the kit is used}"
  add_check cuda-libraries "$([ -n "$LIB_CUDART" ] && [ -n "$LIB_CUBLASLT" ] && echo pass || echo "pass: absent here")" \
    "cudart ${LIB_CUDART:-absent}, cuBLASLt ${LIB_CUBLASLT:-absent}"
  add_check nccl "$([ -n "$LIB_NCCL" ] && echo pass || echo "pass: absent")" "${LIB_NCCL:-no libnccl: the module links a stand-in and the nccl step is skipped}"
  add_check cudnn "$([ -n "$LIB_CUDNN" ] && echo pass || echo "pass: absent")" "${LIB_CUDNN:-not found (no mtrain path needs it yet)}"
  add_check compute-sanitizer "$([ -n "$SANITIZER" ] && echo pass || echo "pass: absent")" "${SANITIZER:-not found: the sanitizer step is skipped}"
  # the module's libraries where the dynamic loader finds them (the wheels' folders are not in its cache)
  local d extra=""
  for f in "$LIB_CUDART" "$LIB_CUBLASLT" "$LIB_NCCL"; do
    [ -n "$f" ] || continue; d=$(dirname "$f"); case ":$extra:" in *":$d:"*) ;; *) extra="$extra${extra:+:}$d" ;; esac
  done
  [ -z "$extra" ] || export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$extra"
}

plumbing_checks() { # data, reference, recipes, peers' inputs: both modes
  local f miss=""
  for f in "$BYTE_DATA.bin" "$BYTE_DATA.idx" "$BPE_DATA.bin" "$BPE_DATA.idx" "$VOCAB" "$MERGES"; do
    [ -f "$f" ] || miss="$miss $f"
  done
  DATA_MISSING=$miss; REF_OK=0
  if [ -z "$miss" ]; then add_check data pass "corpora and GPT-2 tokenizer files found"
  else add_check data fail "missing:$miss; make the kit (make gpu-kit) or run scripts/gpu-check.sh --prepare on a CPU machine first"; return; fi
  if [ -f "$REF_LOSSES" ] && [ "$(cat "$REF_DIR/gpt-tiny-cpu.args" 2>/dev/null)" = "$(ref_args)" ] &&
     [ "$(jget "$REF_LOSSES" lm_loss | wc -l)" -eq $LOSS_ITERS ]; then
    REF_OK=1; add_check cpu_reference pass "$LOSS_ITERS losses, same arguments"
  else
    add_check cpu_reference "pass: absent" "no matching $REF_LOSSES: the GPU run computes it on its CPUs first"
  fi
  local m hmiss=""
  for m in $HF_MODELS; do
    [ -f "$HF_DIR/$m/config.json" ] && [ -f "$HF_DIR/$m.mtrain.jsonl" ] || hmiss="$hmiss $m"
  done
  if [ -z "$hmiss" ]; then add_check hf_inputs pass "exports and mtrain log-probabilities of $HF_MODELS"
  else add_check hf_inputs "pass: absent" "no export in $HF_DIR for:$hmiss (make gpu-kit makes them): that part of hf_logprobs is skipped"; fi
  if [ ! -x "$MT" ]; then add_check recipes fail "no $MT binary to run mtrain check with"; return; fi
  local run
  for run in $RECIPES; do # all at once, reported in order
    declare -n args="$run"
    { "$MT" check "${args[@]}" --backend cuda >"$LOGS/check_$run.log" 2>&1; echo $? >"$LOGS/check_$run.rc"; } &
    unset -n args
  done
  wait
  for run in $RECIPES; do
    declare -n args="$run"
    if [ "$(cat "$LOGS/check_$run.rc" 2>/dev/null)" = 0 ]; then add_check "recipe $run" pass "mtrain check ${args[*]:0:2} + overrides"
    else add_check "recipe $run" fail "$(grep -m1 -i error "$LOGS/check_$run.log")"; fi
    unset -n args
  done
  rm -f "$LOGS"/check_*.rc
}

run_step() { # run_step CAP_S LOG CMD...: CMD under the step's timeout; sets RC and DT
  local c; c=$(cap "$1"); local log=$2; shift 2
  if [ "$c" -lt 5 ]; then RC=125; DT=0; echo "out of time budget" >"$log"; return; fi
  local t0; t0=$(date +%s.%N)
  timeout --kill-after=5 "$c" "$@" >"$log" 2>&1; RC=$?
  DT=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  { [ $RC -eq 124 ] || [ $RC -eq 137 ]; } && echo "gpu-check: timed out after $c s" >>"$log"
}
why_rc() { case $1 in 124|137) echo "timed out";; 125) echo "no time left in the budget";; *) echo "exit $1";; esac; }

# ---- the CUDA module: built here from src/, else the kit's prebuilt one ----
module_build_script() { # the commands that build the module into WORK/module (printed by a dry run)
  local nvflags="-O2 -std=c++17 -I. -gencode arch=compute_${ARCH},code=sm_${ARCH} -Xcompiler -fPIC,-fvisibility=hidden"
  local inc="" d
  for d in $INC_DIRS; do [ -d "$d" ] && inc="$inc -I$d"; done
  local nccl="$LIB_NCCL" cc nccl_h=""
  cc=$(command -v cc || command -v gcc || echo cc)
  for d in $INC_DIRS; do [ -f "$d/nccl.h" ] && nccl_h=$d; done
  echo "set -e; cd '$SRC'; mkdir -p '$WORK/module/obj'"
  echo "ls cuda/*.cu | xargs -P $JOBS -I{} sh -c 'f={}; \"$NVCC\" $nvflags$inc -c \$f -o \"$WORK/module/obj/\$(basename \$f .cu).o\"'"
  if [ -z "$nccl" ]; then
    nccl="$WORK/module/stub/libnccl.so.2"
    echo "mkdir -p '$WORK/module/stub'; $cc -O2 -shared -fPIC -Wl,-soname,libnccl.so.2 -o '$nccl' nccl_stub.c"
  fi
  if [ -n "$nccl_h" ]; then # the module's two C files; without nccl.h the kit's objects built with them
    echo "for c in parallel/comm_nccl.c parallel/cuda_module.c; do $cc -std=c11 -D_GNU_SOURCE -O2 -fPIC -fvisibility=hidden -DMT_HAVE_CUDA=1 -I.$inc -c \$c -o \"$WORK/module/obj/\$(basename \$c .c).o\"; done"
  else
    echo "cp obj/comm_nccl.o obj/cuda_module.o '$WORK/module/obj/'"
  fi
  echo "g++ -shared -o '$WORK/module/libmtrain_cuda.so' '$WORK/module/obj/'*.o '$LIB_CUDART' '$LIB_CUBLASLT' '$nccl' -lstdc++ -Wl,-rpath,'$(dirname "$LIB_CUBLASLT")':'$(dirname "$nccl")'"
}
step_build() {
  local note=""
  if [ -z "${ARCH:-}" ]; then
    local cc_; cc_=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
    case "$cc_" in 90) ARCH=90a ;; [0-9][0-9]|[0-9][0-9][0-9]) ARCH=$cc_ ;; *) ARCH=90a ;; esac
  fi
  ARCH_USED=$ARCH
  module_build_script >"$LOGS/build-commands.sh"
  if [ "$MODE" = dry ]; then
    MODULE=""
    add_step build "skipped: dry run" 0 ", \"commands\": $(jstr "$(cat "$LOGS/build-commands.sh")")" "would build for sm_$ARCH; prebuilt $( [ -f "$PREBUILT" ] && echo present || echo absent)"
    return
  fi
  if [ -n "$NVCC" ] && [ -n "$LIB_CUDART" ] && [ -n "$LIB_CUBLASLT" ]; then
    run_step 150 "$LOGS/build.log" bash "$LOGS/build-commands.sh"
    if [ $RC -eq 0 ] && [ -f "$WORK/module/libmtrain_cuda.so" ]; then
      MODULE="$WORK/module/libmtrain_cuda.so"
      [ -n "$LIB_NCCL" ] || note=" (NCCL absent: linked the stand-in)"
      export MT_CUDA_MODULE="$MODULE"
      add_step build "pass$note" "$DT" ", \"arch\": $(jstr "sm_$ARCH"), \"module\": \"built here\"" "sm_$ARCH, $DT s"
      return
    fi
    note="the build failed ($(why_rc $RC); build.log: $(grep -m1 -i 'error' "$LOGS/build.log" | head -c 200))"
  else
    note="no nvcc / cudart / cuBLASLt to build with"
    DT=0
  fi
  if [ -f "$PREBUILT" ] && ! ldd "$PREBUILT" 2>&1 | grep -q 'not found'; then
    MODULE="$PREBUILT"; export MT_CUDA_MODULE="$MODULE"
    add_step build "pass: the kit's prebuilt module; $note" "$DT" ", \"module\": \"prebuilt\"" "prebuilt module"
  else
    MODULE=""
    add_step build "fail: $note; no usable prebuilt module ($(ldd "$PREBUILT" 2>&1 | grep 'not found' | head -n 2 | tr '\n' ' '))" "$DT" \
      ", \"log_tail\": $(jstr "$(tail -n 5 "$LOGS/build.log" 2>/dev/null)")"
  fi
}

step_parity() {
  run_step 75 "$LOGS/parity.log" bash -c 'r=0; for t in "$@"; do "$t"; s=$?; [ $r -eq 0 ] && r=$s; done; exit $r' \
    parity "$TBIN/test_cuda_parity" "$TBIN/test_cuda_parity_train"
  local n_cmp n_bad worst pdet
  n_cmp=$(grep -c ' nmse ' "$LOGS/parity.log"); n_bad=$(grep -c ' nmse .*FAIL$' "$LOGS/parity.log")
  worst=$(awk '/ nmse /{for(i=1;i<=NF;i++) if($i=="nmse"){e=$(i+1); t=$(i+3); sub(/\)/,"",t); if (t+0 > 0) {r=e/t; if(r>w) w=r}}} END{printf "%.3g", w+0}' "$LOGS/parity.log")
  pdet=", \"comparisons\": $n_cmp, \"failed_comparisons\": $n_bad, \"worst_nmse_over_tolerance\": $(jnum "$worst"), \"failed\": [$(grep ' nmse .*FAIL$' "$LOGS/parity.log" | head -n 20 | while read -r l; do printf '%s,' "$(jstr "$l")"; done | sed 's/,$//')]"
  local fig="$n_cmp comparisons, $n_bad failed, worst nmse/tol $worst"
  case $RC in
    0) add_step parity pass "$DT" "$pdet" "$fig" ;;
    77) add_step parity "fail: skipped ($(tail -n 1 "$LOGS/parity.log")): on a GPU machine it must run" "$DT" "$pdet" "$fig" ;;
    *) add_step parity "fail: $(why_rc $RC) (parity.log)" "$DT" "$pdet" "$fig" ;;
  esac
}

step_loss() { # the GPU run first: the CPU reference (when the kit has none) only matters when it ran
  rm -f "$LOGS/loss_cuda.jsonl"
  run_step 60 "$LOGS/loss_cuda.log" "$MT" "${LOSS_ARGS[@]}" --backend cuda --metrics "$LOGS/loss_cuda.jsonl"
  if [ $RC -ne 0 ]; then add_step loss "fail: gpt-tiny on cuda $(why_rc $RC): $(grep -m1 'error' "$LOGS/loss_cuda.log")" "$DT" ""; return; fi
  local dt_gpu=$DT
  if [ $REF_OK -eq 0 ]; then
    mkdir -p "$REF_DIR"
    run_step 60 "$LOGS/cpu_reference.log" "$MT" "${LOSS_ARGS[@]}" --backend cpu --metrics "$REF_LOSSES"
    [ $RC -eq 0 ] && ref_args >"$REF_DIR/gpt-tiny-cpu.args" && REF_OK=1
  fi
  DT=$dt_gpu
  if [ $REF_OK -eq 0 ]; then add_step loss "fail: no CPU reference losses (cpu_reference.log)" "$DT" ""; return; fi
  jget "$LOGS/loss_cuda.jsonl" lm_loss >"$LOGS/loss_cuda.txt"
  jget "$REF_LOSSES" lm_loss >"$LOGS/loss_cpu.txt"
  local v_ok v_last v_mean v_max v_n
  read -r v_ok v_last v_mean v_max v_n <<<"$(loss_verdict "$LOGS/loss_cuda.txt" "$LOGS/loss_cpu.txt" $LOSS_ITERS)"
  local ldet=", \"iterations\": $v_n, \"tolerance\": $LOSS_TOL, \"last_abs_diff\": $(jnum "$v_last"), \"mean_last10_abs_diff\": $(jnum "$v_mean"), \"max_abs_diff\": $(jnum "$v_max"), \"cuda_losses\": [$(paste -sd, "$LOGS/loss_cuda.txt")], \"cpu_losses\": [$(paste -sd, "$LOGS/loss_cpu.txt")]"
  local fig="|dloss| last $v_last, mean10 $v_mean (tol $LOSS_TOL)"
  if [ "$v_ok" = OK ]; then add_step loss pass "$DT" "$ldet" "$fig"
  else add_step loss "fail: |dloss| last $v_last, mean of last 10 $v_mean (tolerance $LOSS_TOL, $v_n of $LOSS_ITERS iterations)" "$DT" "$ldet" "$fig"; fi
}

hf_start() { # the transformers check, in the background on the CPUs (it needs no GPU): one line per model
  : >"$LOGS/hf.jsonl"; rm -f "$LOGS/hf.done"
  ( for m in $HF_MODELS; do
      [ -f "$HF_DIR/$m/config.json" ] || continue
      local dry=(); [ "$MODE" = dry ] && dry=(--dry-run)
      timeout 120 env LD_LIBRARY_PATH="$ORIG_LDP" "$PY" "$PEERS/hf_check.py" "$HF_DIR/$m" "$HF_DIR/$m.mtrain.jsonl" --tol "$HF_TOL" "${dry[@]}" >>"$LOGS/hf.jsonl" 2>>"$LOGS/hf.log"
      echo "$m rc $?" >>"$LOGS/hf.log"
    done; : >"$LOGS/hf.done" ) &
  HF_PID=$!
  HF_T0=$(date +%s)
}
hf_finish() {
  while [ ! -f "$LOGS/hf.done" ] && [ $(( $(date +%s) - HF_T0 )) -lt 120 ] && [ "$(cap 999)" -gt 5 ]; do sleep 1; done
  [ -f "$LOGS/hf.done" ] || { kill $(pgrep -P "$HF_PID") "$HF_PID" 2>/dev/null; echo "gpu-check: stopped: out of time" >>"$LOGS/hf.log"; }
  wait "$HF_PID" 2>/dev/null
  local n worst st fig
  n=$(grep -c '"check"' "$LOGS/hf.jsonl")
  worst=$(jget "$LOGS/hf.jsonl" max_abs_diff | sort -g | tail -n 1)
  fig="$n model(s), max |dlogprob| ${worst:-n/a} (tol $HF_TOL)"
  if [ "$n" -eq 0 ]; then st="skipped: no Hugging Face exports in the kit or python3 missing ($(tail -n 1 "$LOGS/hf.log" 2>/dev/null))"
  elif grep -q '"error"' "$LOGS/hf.jsonl" || grep -q '"pass": false' "$LOGS/hf.jsonl"; then st="fail: $(grep -m1 -o '"error": "[^"]*"\|"max_abs_diff": [^,]*' "$LOGS/hf.jsonl" | head -n 1)"
  elif grep -q '"skipped"' "$LOGS/hf.jsonl"; then
    st="skipped: $(jget "$LOGS/hf.jsonl" skipped | head -n 1)"; [ "$MODE" = dry ] && st="skipped: dry run (inputs parsed; $(jget "$LOGS/hf.jsonl" skipped | head -n 1))"
  elif [ "$MODE" = dry ]; then st="skipped: dry run (inputs parsed)"
  else st=pass; fi
  add_step hf_logprobs "$st" "$(( $(date +%s) - HF_T0 ))" ", \"models\": [$(paste -sd, "$LOGS/hf.jsonl")]" "$fig"
}

peer() { # peer NAME ARRAY CAP: the PyTorch peer on the GPU right before mtrain's run
  local name=$1 cap_s=$3
  declare -n pargs="$2"
  rm -f "$LOGS/$name.jsonl"
  run_step "$cap_s" "$LOGS/$name.log" env PYTHONUNBUFFERED=1 LD_LIBRARY_PATH="$ORIG_LDP" "$PY" "$PEERS/torch_peer.py" "${pargs[@]}" \
    --peak-tflops "${PEAK_TFLOPS:-989}" --json "$LOGS/$name.jsonl"
  unset -n pargs
  local tps mfu
  tps=$(jget "$LOGS/$name.jsonl" tokens_per_s | tail -n 1); mfu=$(jget "$LOGS/$name.jsonl" mfu | tail -n 1)
  eval "PEER_TPS_${name//[^a-z0-9]/_}=\${tps}"
  local det=", \"result\": $(tail -n 1 "$LOGS/$name.jsonl" 2>/dev/null || echo null)"
  case $RC in
    0) add_step "$name" pass "$DT" "$det" "$tps tok/s, MFU $mfu" ;;
    3) add_step "$name" "skipped: $(jget "$LOGS/$name.jsonl" skipped | tail -n 1)" "$DT" "$det" ;;
    *) add_step "$name" "fail: the PyTorch peer $(why_rc $RC): $(grep -m1 -i 'error' "$LOGS/$name.log" | head -c 200)" "$DT" "$det" ;;
  esac
}
throughput() { # throughput NAME ARRAY CAP TARGET PEER_NAME [ATTENTION]: ATTENTION sets MT_CUDA_ATTENTION
  # (the attention kernels: mma, the tensor-core ones, by default; fp32) for an A/B of the same run
  local name=$1 cap_s=$3 target=$4 pname=$5 attn=${6:-mma}
  declare -n targs="$2"
  rm -f "$LOGS/$name.jsonl"
  run_step "$cap_s" "$LOGS/$name.log" env MT_CUDA_ATTENTION="$attn" "$MT" "${targs[@]}" --backend cuda --metrics "$LOGS/$name.jsonl"
  unset -n targs
  if [ $RC -ne 0 ]; then add_step "$name" "fail: $(why_rc $RC): $(grep -m1 'error' "$LOGS/$name.log")" "$DT" ""; return; fi
  local tj tps mfu ms ptps ratio
  tj=$(throughput_json "$LOGS/$name.jsonl" "$LOGS/$name.log")
  tps=$(median_after "$LOGS/$name.jsonl" tokens_per_s $WARMUP); mfu=$(median_after "$LOGS/$name.jsonl" mfu $WARMUP)
  ms=$(median_after "$LOGS/$name.jsonl" ms_per_iter $WARMUP)
  eval "ptps=\${PEER_TPS_${pname//[^a-z0-9]/_}:-}"
  ratio=$(awk -v a="$tps" -v b="$ptps" 'BEGIN{if (a > 0 && b > 0) printf "%.3f", a/b}')
  add_step "$name" pass "$DT" "$tj, \"attention\": $(jstr "$attn"), \"tokens_per_s_over_peer\": $(jnum "$ratio"), \"target\": $(jstr "$target")" \
    "$tps tok/s, $ms ms/it, MFU $mfu, x${ratio:-?} of the peer"
}

plan_device() { # the planner's device for a GPU name as nvidia-smi prints it (exact names), or nothing
  case "$1" in
    "NVIDIA H200") echo h200 ;; "NVIDIA H100 80GB HBM3") echo h100-80g ;; "NVIDIA H100 PCIe") echo h100-pcie ;;
    "NVIDIA A100-SXM4-80GB") echo a100-80g ;; "NVIDIA A100-SXM4-40GB") echo a100-40g ;;
  esac
}

op_profile() { # op_profile NAME ARRAY ITERS: where an mtrain run's time goes, op by op (logging.timing_level
  # 3: the device waits after each op, so the table sums each op's own time; not the throughput figure),
  # then `mtrain plan --compare` of that run on this device: the cost model's terms (GEMMs, attention,
  # elementwise, optimizer) beside the measured op classes
  local name=$1 iters=$3 pdev cmp=""
  declare -n oargs="$2"
  run_step 45 "$LOGS/$name.log" "$MT" "${oargs[@]}" --backend cuda --train-iters "$iters" --timing-log-level 3 \
    --log-interval 1 --metrics "$LOGS/$name.jsonl" # a record per iteration: --compare leaves out the first
  if [ $RC -ne 0 ]; then unset -n oargs; add_step "$name" "fail: $(why_rc $RC): $(grep -m1 'error' "$LOGS/$name.log")" "$DT" ""; return; fi
  pdev=$(plan_device "$GPU_NAME")
  if [ -n "$pdev" ] && timeout 30 "$MT" plan "${oargs[@]}" --train-iters "$iters" --compare "$LOGS/$name.jsonl" --gpu "$pdev" \
       --json >"$LOGS/${name}_plan.json" 2>"$LOGS/${name}_plan.err"; then
    timeout 30 "$MT" plan "${oargs[@]}" --train-iters "$iters" --compare "$LOGS/$name.jsonl" --gpu "$pdev" 2>&1 |
      sed -n '/term (ms per iteration)/,/^$/p'
    cmp=", \"plan_device\": \"$pdev\", \"plan_compare\": $(cat "$LOGS/${name}_plan.json")"
  elif [ -n "$pdev" ]; then
    cmp=", \"plan_compare_error\": $(jstr "$(head -c 300 "$LOGS/${name}_plan.err")")"
  fi
  unset -n oargs
  sed -n '/^op timers/,/all ops/p' "$LOGS/$name.log" >"$LOGS/$name.txt"
  cat "$LOGS/$name.txt"
  local rows top
  rows=$(awk 'NR > 2 && NF >= 5 && $1 != "all" {printf "%s{\"op\": \"%s\", \"class\": \"%s\", \"calls\": %s, \"ms\": %s, \"share\": \"%s\"}", (n++ ? ", " : ""), $1, $2, $3, $4, $5}' "$LOGS/$name.txt")
  top=$(awk 'NR > 2 && NF >= 5 && $1 != "all" {print $4, $1}' "$LOGS/$name.txt" | sort -gr | head -n 4 | awk '{printf "%s%s %.1f", (n++ ? ", " : ""), $2, $1}')
  add_step "$name" pass "$DT" ", \"iterations\": $iters, \"ops_ms_per_iteration\": [$rows]$cmp" "ms/it: $top"
}

step_gemm() { # the GEMM ops alone, beside the planner's model (bench_cuda_gemm; "GEMM_ROW {json}" lines)
  run_step 45 "$LOGS/gemm.log" "$GEMM_BIN"
  case $RC in
    0) grep -v '^GEMM_ROW ' "$LOGS/gemm.log"
       local rows fig
       rows=$(sed -n 's/^GEMM_ROW //p' "$LOGS/gemm.log" | paste -sd, -)
       fig=$(grep -E '^(gpt1.3b fc1 +(fwd|gelu_fwd)|square 8192 +fwd) ' "$LOGS/gemm.log" |
             awk '{printf "%s%s %s %s %.0f TFLOP/s (x%s model)", (n++ ? ", " : ""), $1, $2, $3, $8, $10}')
       add_step gemm pass "$DT" ", \"rows\": [$rows]" "$fig" ;;
    77) add_step gemm "fail: bench_cuda_gemm skipped ($(tail -n 1 "$LOGS/gemm.log")): on a GPU machine it must run" "$DT" "" ;;
    *) add_step gemm "fail: bench_cuda_gemm $(why_rc $RC) (gemm.log)" "$DT" ", \"log_tail\": $(jstr "$(tail -n 5 "$LOGS/gemm.log")")" ;;
  esac
}

probe_step() { # probe_step NAME SCRIPT CAP_S FIGURE_PY: one of the image-PyTorch probes (fp8_gemm.py, attn_rate.py);
  # JSON lines in NAME.jsonl become the step's rows; FIGURE_PY prints the summary figure from its last line
  local name=$1 script=$2 cap_s=$3 figure_py=$4 rows fig
  rm -f "$LOGS/$name.jsonl"
  run_step "$cap_s" "$LOGS/$name.log" env PYTHONUNBUFFERED=1 LD_LIBRARY_PATH="$ORIG_LDP" "$PY" "$PEERS/$script" \
    --json "$LOGS/$name.jsonl"
  rows=$(paste -sd, "$LOGS/$name.jsonl" 2>/dev/null)
  case $RC in
    0) fig=$(grep '"summary"' "$LOGS/$name.jsonl" | tail -n 1 | pyrun -c "import json, sys
s = json.loads(sys.stdin.read())
$figure_py" 2>&1)
       add_step "$name" pass "$DT" ", \"rows\": [$rows]" "$fig" ;;
    3) add_step "$name" "skipped: $(jget "$LOGS/$name.jsonl" skipped | tail -n 1)" "$DT" ", \"rows\": [$rows]" ;;
    *) add_step "$name" "fail: $script $(why_rc $RC): $(grep -m1 -i 'error' "$LOGS/$name.log" | head -c 200)" "$DT" \
         ", \"rows\": [$rows]" ;;
  esac
}
step_fp8() { # fp8 against bf16 GEMMs through PyTorch's _scaled_mm: fast / split accumulation, sustained
  probe_step fp8_gemm fp8_gemm.py 75 'print("fp8/bf16 fast x%s, split x%s; sustained over short: bf16 x%s at %s MHz, %s W, fp8 x%s at %s MHz, %s W" % (
    s["fp8_fast_over_bf16"], s["fp8_split_over_bf16"], s["sustained_bf16_over_short"], s["bf16_sm_clock_mhz"],
    s["bf16_power_w"], s["sustained_fp8_over_short"], s["sm_clock_mhz"], s["power_w"]))'
}
step_attn() { # causal attention forward + backward through SDPA's cuDNN and FlashAttention-2 backends
  probe_step attention attn_rate.py 60 'print(", ".join("%s %s TFLOP/s" % (k.replace("_ATTENTION", ""), v)
    for k, v in s["fwd_bwd_tflops"].items()))'
}

step_nccl() {
  if [ -z "$LIB_NCCL" ]; then add_step nccl "skipped: no NCCL on this machine (the module linked the stand-in)" 0 ""; return; fi
  run_step 60 "$LOGS/nccl.log" "$TBIN/test_comm_nccl"
  case $RC in
    0) add_step nccl pass "$DT" "" "every call on $(nvidia-smi -L 2>/dev/null | wc -l) GPU(s)" ;;
    77) add_step nccl "fail: test_comm_nccl skipped ($(tail -n 1 "$LOGS/nccl.log")): on a GPU machine it must run" "$DT" "" ;;
    *) add_step nccl "fail: test_comm_nccl $(why_rc $RC) (nccl.log)" "$DT" ", \"log_tail\": $(jstr "$(tail -n 5 "$LOGS/nccl.log")")" ;;
  esac
}
step_sanitizer() {
  if [ -z "$SANITIZER" ]; then add_step sanitizer "skipped: compute-sanitizer not found" 0 ""; return; fi
  local sdet="" sstat=pass stot=0 run nerr fig=""
  for run in SAN_TINY SAN_LLAMA SAN_MOE; do
    declare -n args="$run"
    run_step 45 "$LOGS/sanitizer_$run.log" env MT_NO_REEXEC=1 "$SANITIZER" --tool memcheck --error-exitcode 99 --print-limit 20 \
      "$MT" "${args[@]}" --backend cuda
    unset -n args
    if grep -qi 'device not supported\|not supported on this\|Unable to find injection' "$LOGS/sanitizer_$run.log"; then
      add_step sanitizer "skipped: compute-sanitizer refuses this device or runtime ($(grep -m1 -i 'not supported\|injection' "$LOGS/sanitizer_$run.log" | head -c 120))" "$DT" ""
      return
    fi
    nerr=$(grep -o 'ERROR SUMMARY: [0-9]*' "$LOGS/sanitizer_$run.log" | grep -o '[0-9]*$' | tail -n 1)
    sdet="$sdet, \"$run\": {\"rc\": $RC, \"errors\": $(jnum "${nerr:-}"), \"seconds\": $DT}"
    fig="$fig${fig:+, }$run ${nerr:-?} err"
    stot=$(awk -v a="$stot" -v b="$DT" 'BEGIN{printf "%.1f", a+b}')
    [ $RC -eq 0 ] || sstat="fail: memcheck on $run: $(why_rc $RC), ${nerr:-?} error(s) (sanitizer_$run.log)"
  done
  add_step sanitizer "$sstat" "$stot" "$sdet" "$fig"
}

probe_dry() { # probe_dry NAME SCRIPT N_ROWS ROW_TEST_PY: SCRIPT --dry-run writes N_ROWS JSON rows each passing the test
  if pyrun "$PEERS/$2" --dry-run --json "$LOGS/$1-dry.jsonl" >"$LOGS/$1-dry.log" 2>&1 &&
     pyrun -c "import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == $3 and all($4 for r in rows), rows" "$LOGS/$1-dry.jsonl" >>"$LOGS/$1-dry.log" 2>&1; then
    add_check "$1" pass "$2 --dry-run: $(wc -l <"$LOGS/$1-dry.jsonl") rows parsed"
  else
    add_check "$1" fail "$2 --dry-run: $(tail -n 1 "$LOGS/$1-dry.log")"
  fi
}
dry_parsers() { # the report's parsers on real mtrain output: a 4-iteration CPU run of the loss recipe
  local PL_ARGS=("${LOSS_ARGS[@]}" --train-iters 4 --micro-batch-size 1 --global-batch-size 1 --log-interval 1) pv pj
  if [ -n "$DATA_MISSING" ]; then return; fi
  if timeout 60 "$MT" "${PL_ARGS[@]}" --backend cpu --metrics "$LOGS/plumbing.jsonl" >"$LOGS/plumbing.log" 2>&1; then
    jget "$LOGS/plumbing.jsonl" lm_loss >"$LOGS/plumbing_loss.txt"
    pv=$(loss_verdict "$LOGS/plumbing_loss.txt" "$LOGS/plumbing_loss.txt" 4)
    pj=$(WARMUP=2 throughput_json "$LOGS/plumbing.jsonl" "$LOGS/plumbing.log")
    if [ "${pv%% *}" = OK ] && [[ "$pj" == *'"tokens_per_s": '[0-9]* ]] && [[ "$pj" == *'"memory": "peak memory'* ]]; then
      add_check parsers pass "loss verdict '$pv'; throughput figures parsed from a CPU run"
    else add_check parsers fail "loss verdict '$pv', throughput '$pj' (plumbing.log)"; fi
  else
    add_check parsers fail "the 4-iteration CPU run failed: $(grep -m1 error "$LOGS/plumbing.log" 2>/dev/null)"
  fi
  # the ops steps' plan comparison: the plumbing run's metrics against the h200 plan, as JSON
  if [ -s "$LOGS/plumbing.jsonl" ] && timeout 30 "$MT" plan "${PL_ARGS[@]}" --compare "$LOGS/plumbing.jsonl" --gpu h200 --json \
       >"$LOGS/plumbing_plan.json" 2>&1 && pyrun -c 'import json, sys
d = json.load(open(sys.argv[1])); t = {x["term"]: x for x in d["terms"]}
assert t["step"]["predicted_ms"] > 0, t' "$LOGS/plumbing_plan.json" >>"$LOGS/plumbing_plan.json" 2>&1; then
    add_check plan_compare pass "mtrain plan --compare --gpu h200 on the CPU run's metrics: terms parsed"
  else
    add_check plan_compare fail "mtrain plan --compare --gpu h200: $(tail -n 1 "$LOGS/plumbing_plan.json" 2>/dev/null)"
  fi
  # the gemm step's program and parser: its rows on the CPU backend at 1/16 of each dimension
  if timeout 60 "$GEMM_BIN" --dry-run --gpu h200 >"$LOGS/gemm-dry.log" 2>&1 &&
     sed -n 's/^GEMM_ROW //p' "$LOGS/gemm-dry.log" | pyrun -c 'import json, sys
rows = [json.loads(l) for l in sys.stdin]
assert len(rows) >= 20 and all(r["model_tflops"] > 0 and r["ms"] > 0 for r in rows), rows' >>"$LOGS/gemm-dry.log" 2>&1; then
    add_check gemm pass "bench_cuda_gemm --dry-run: $(grep -c '^GEMM_ROW ' "$LOGS/gemm-dry.log") rows parsed, each beside the h200 model"
  else
    add_check gemm fail "bench_cuda_gemm --dry-run: $(tail -n 1 "$LOGS/gemm-dry.log")"
  fi
  # the probe steps' programs and parsers: their shapes and FLOPs (no timing without a GPU)
  probe_dry fp8_gemm fp8_gemm.py 15 'r["gflop"] > 0 and r["dtype"] in ("bf16", "e4m3")'
  probe_dry attention attn_rate.py 6 'r["fwd_gflop"] > 0 and r["causal"] is True'
  local p cfg seq pf mf rel
  for p in PEER_125M PEER_13B; do # the peer's arguments parse, and its FLOP count is mtrain's (plan, tp 1)
    declare -n pa="$p"
    if ! pyrun "$PEERS/torch_peer.py" "${pa[@]}" --dry-run >>"$LOGS/peer-dry.log" 2>&1; then
      add_check "peer $p" fail "$(tail -n 1 "$LOGS/peer-dry.log")"; unset -n pa; continue
    fi
    cfg="configs/${pa[1]}.yaml"; seq="${pa[3]}"
    pf=$(pyrun "$PEERS/torch_peer.py" --flops "${pa[1]}" --seq "$seq" 2>&1)
    unset -n pa
    "$MT" plan --config "$cfg" --gpus 1 --gpu h100-80g --tensor-model-parallel-size 1 --set parallel.sequence_parallel=false \
      --seq-length "$seq" --json >"$LOGS/plan_$p.json" 2>&1
    mf=$(grep -o '"flops": {[^}]*}' "$LOGS/plan_$p.json" | awk -F'[:,]' '{for (i=1;i<=NF;i++) {if ($i ~ /tokens_iter/) t=$(i+1); if ($i ~ /"model_iter"/) m=$(i+1)}} END {if (t > 0) printf "%.10g", m/t}')
    rel=$(awk -v a="$pf" -v b="$mf" 'BEGIN{if (b > 0) {d=(a-b)/b; if (d<0) d=-d; printf "%.2g", d} else print "nan"}')
    if awk -v r="$rel" 'BEGIN{exit !(r != "nan" && r < 1e-6)}'; then
      add_check "peer $p" pass "$(tail -n 1 "$LOGS/peer-dry.log" | head -c 100); FLOPs/token $pf = mtrain plan's (rel. diff $rel)"
    else
      add_check "peer $p" fail "the peer counts $pf FLOPs/token, mtrain plan $mf ($cfg, seq $seq): MFU would not compare"
    fi
  done
}

GPU_STEPS="build parity loss hf_logprobs peer_gpt125m throughput_gpt125m peer_gpt1.3b throughput_gpt1.3b ops_gpt125m ops_gpt1.3b gemm fp8_gemm attention nccl sanitizer"
gc_main() {
  echo "gpu-check ($MODE, $([ $KIT -eq 1 ] && echo "kit $ROOT" || echo "tree $ROOT")): data $DATA_DIR, out $OUT_DIR, work $WORK, budget $BUDGET_S s (essential $ESSENTIAL_S s)"
  kit_libraries
  find_cuda
  GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  plumbing_checks
  if [ "$MODE" = dry ]; then
    dry_parsers
    step_build
    hf_start; hf_finish
    local s
    for s in $GPU_STEPS; do case $s in build|hf_logprobs) ;; *) add_step "$s" "skipped: dry run" 0 "" ;; esac; done
    finish
  fi
  if [ $N_FAIL -gt 0 ]; then
    echo "gpu-check: plumbing failed (above): nothing run on the GPU"
    local s; for s in $GPU_STEPS; do add_step "$s" "fail: plumbing checks failed" 0 ""; done
    finish
  fi
  nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1 || true
  hf_start # CPUs only: beside the build
  step_build
  if [ -z "$MODULE" ]; then
    hf_finish
    local s; for s in $GPU_STEPS; do case $s in build|hf_logprobs) ;; *) add_step "$s" "fail: no CUDA module" 0 "" ;; esac; done
    finish
  fi
  step_parity
  step_loss
  hf_finish
  peer peer_gpt125m PEER_125M 75
  throughput throughput_gpt125m TP_125M 60 "at least the PyTorch peer's tokens/s" peer_gpt125m
  peer peer_gpt1.3b PEER_13B 90
  throughput throughput_gpt1.3b TP_13B 100 "MFU >= 0.45 on one H200" peer_gpt1.3b
  ESSENTIAL_DONE_S=$(elapsed)
  [ "$ESSENTIAL_DONE_S" -le "$ESSENTIAL_S" ] || echo "gpu-check: the essential figures took $ESSENTIAL_DONE_S s, over the $ESSENTIAL_S s aimed at"
  op_profile ops_gpt125m TP_125M 6
  op_profile ops_gpt1.3b TP_13B 4
  step_gemm
  step_fp8
  step_attn
  step_nccl
  step_sanitizer
  finish
}
