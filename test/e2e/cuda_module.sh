# The CUDA backend is a module (build/libmtrain_cuda.so) that mtrain opens only when CUDA is wanted:
#  1. mtrain links no CUDA library (ldd: no libcudart, libcublasLt, libnccl, libcuda);
#  2. the CPU path loads none: LD_DEBUG=libs of a 1-iteration run with --backend cpu names no CUDA
#     library at all, and with auto on a machine without a driver nothing CUDA is loaded (only the
#     libcuda.so.1 probe is tried) and the run says why it uses the CPU;
#  3. --backend cuda on a machine without a GPU fails with exit 1 (no crash), naming the local rank,
#     the reason and the fix (--backend cpu);
#  4. in a CUDA build: every mt_* symbol the module needs is exported by mtrain and by every test
#     program that can open the module, and with a stand-in
#     libcuda.so.1 (an empty library: a "driver" that cannot drive anything) the module really loads
#     inside mtrain (LD_DEBUG shows libcudart and libnccl: the check of step 2 can fail), the CUDA
#     runtime says no GPU, --backend cuda fails cleanly with that reason and auto trains on the CPU.
# Parts that need a machine without a CUDA driver skip themselves on one that has it.
source test/e2e_lib.sh
need_data
RUN=(--config configs/gpt-tiny.yaml --train-iters 1 --eval-interval 0 --threads 1)
CUDA_LIBS='libcudart|libcublas|libnccl|libcuda\.so'

# 1. nothing CUDA in mtrain's own dependencies
! ldd "$MTRAIN" | grep -E "$CUDA_LIBS" || fail "mtrain links a CUDA library (see ldd above)"

# 2. the CPU path
LD_DEBUG=libs "$MTRAIN" "${RUN[@]}" --backend cpu >"$TMP/cpu.log" 2>&1 || { tail "$TMP/cpu.log"; fail "--backend cpu run failed"; }
! grep -iE "cuda|nccl|cublas" "$TMP/cpu.log" | head -3 | grep . || fail "--backend cpu looked for a CUDA library"
built=0; [ -n "$(grep -o 'CUDA=1' build/.build-flags 2>/dev/null)" ] && built=1
driver=0 # a CUDA driver the dynamic loader could find: ldconfig's cache, LD_LIBRARY_PATH, or nvidia-smi
{ /sbin/ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' || command -v nvidia-smi >/dev/null; } && driver=1
for d in ${LD_LIBRARY_PATH//:/ }; do [ -e "$d/libcuda.so.1" ] && driver=1; done
if [ $driver -eq 0 ]; then
  LD_DEBUG=libs "$MTRAIN" "${RUN[@]}" >"$TMP/auto.log" 2>&1 || { tail "$TMP/auto.log"; fail "auto run failed"; }
  ! grep -E "calling init: .*($CUDA_LIBS)" "$TMP/auto.log" || fail "auto without a driver loaded a CUDA library"
  if [ $built -eq 1 ]; then
    grep -q "backend auto: no CUDA driver (libcuda.so.1 not found): using the CPU backend" "$TMP/auto.log" \
      || fail "auto did not say why it uses the CPU"
  fi
  grep -q "backend cpu" "$TMP/auto.log" || fail "auto did not train on the CPU backend"

  # 3. --backend cuda without a GPU: a clear error, exit 1
  rc=0; "$MTRAIN" "${RUN[@]}" --backend cuda >"$TMP/cuda.log" 2>&1 || rc=$?
  [ $rc -eq 1 ] || { cat "$TMP/cuda.log"; fail "--backend cuda without a GPU: exit $rc, expected 1"; }
  grep -q "training.backend=cuda (local rank 0): " "$TMP/cuda.log" || { cat "$TMP/cuda.log"; fail "no local rank in the error"; }
  grep -qE "no CUDA driver|built without the CUDA backend" "$TMP/cuda.log" || { cat "$TMP/cuda.log"; fail "no reason in the error"; }
  grep -q -- "--backend cpu" "$TMP/cuda.log" || fail "no fix in the error"
  echo "no driver: cpu and auto load no CUDA library; --backend cuda: $(grep -o 'error: .*' "$TMP/cuda.log" | head -c 160)"
else
  echo "note: a CUDA driver is installed here: the no-driver checks are skipped"
fi

# 4. the module itself (CUDA builds)
if [ $built -eq 1 ]; then
  MOD=build/libmtrain_cuda.so
  [ -f "$MOD" ] || fail "$MOD missing in a CUDA build"
  # every binary that can open the module (mtrain, and each test program that links the CUDA
  # backend's entry points: the GPU check runs test_cuda_parity* and test_comm_nccl) exports what
  # the module takes from it, else dlopen fails there with "undefined symbol" (the first GPU run did)
  n_bins=0
  needs=$(nm -D --undefined-only "$MOD" | awk '$2 ~ /^mt_/ {print $2}')
  for b in "$MTRAIN" build/test/*/*; do
    [ -x "$b" ] || continue
    nm -D --defined-only "$b" 2>/dev/null | awk '{print $3}' >"$TMP/exports"
    grep -qx mt_backend_cuda_create "$TMP/exports" || continue
    n_bins=$((n_bins + 1))
    for s in $needs; do
      grep -qx "$s" "$TMP/exports" || fail "the module needs $s, which $b does not export (list it in core/backend_cuda_module.c's mt_cuda_module_host_imports)"
    done
  done
  [ $n_bins -ge 4 ] || fail "only $n_bins binaries link the CUDA backend's entry points (mtrain and the three GPU test programs expected)"
  [ "$(nm -D --defined-only "$MOD" | awk '$3 ~ /^mt_/' | awk '{print $3}')" = mt_cuda_module_entry ] \
    || fail "the module exports more than its entry point"
  if [ $driver -eq 0 ]; then
    printf 'int mt_stand_in_cuda_driver;\n' | ${CC:-cc} -shared -fPIC -x c - -o "$TMP/libcuda.so.1" || fail "cannot build the stand-in driver"
    rc=0; LD_LIBRARY_PATH="$TMP" LD_DEBUG=libs "$MTRAIN" "${RUN[@]}" --backend cuda >"$TMP/mod.log" 2>&1 || rc=$?
    [ $rc -eq 1 ] || { tail "$TMP/mod.log"; fail "--backend cuda with the stand-in driver: exit $rc, expected 1"; }
    grep -qE "calling init: .*libcudart" "$TMP/mod.log" || fail "the module's libcudart was not loaded (or LD_DEBUG shows nothing)"
    grep -qE "calling init: .*libnccl" "$TMP/mod.log" || fail "the module's libnccl was not loaded"
    grep -q "training.backend=cuda (local rank 0): no CUDA GPU found (cudaGetDeviceCount: " "$TMP/mod.log" \
      || { grep error "$TMP/mod.log"; fail "no clear error from the loaded module"; }
    LD_LIBRARY_PATH="$TMP" "$MTRAIN" "${RUN[@]}" >"$TMP/mod-auto.log" 2>&1 || { tail "$TMP/mod-auto.log"; fail "auto with the stand-in driver failed"; }
    grep -q "backend auto: no CUDA GPU found" "$TMP/mod-auto.log" || fail "auto did not say why it uses the CPU"
    echo "module: loads inside mtrain, needs only $(nm -D --undefined-only "$MOD" | awk '$2 ~ /^mt_/ {printf "%s ", $2}')from it; no GPU -> $(grep -o 'no CUDA GPU found[^;]*' "$TMP/mod.log" | head -n 1)"
  fi
fi
echo "PASS"
