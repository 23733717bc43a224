#!/usr/bin/env bash
# test/cuda_emu/run.sh — the tensor-core attention kernels (cuda/cuda_attention_mma.cu with its
# mma.sync fragments and ldmatrix loads) checked on
# a machine without a GPU (and the fused cross-entropy, vectorised GeLU / add / cast, the fused
# residual add + norm, init_normal, the embedding and RoPE too): the files are compiled for the host with the real
# cuda/cuda_common.cuh over stand-ins for the CUDA headers it includes (cuda_runtime.h, cuda_bf16.h,
# cublasLt.h), for mma.sync and ldmatrix (cuda_runtime.h) and for cub's radix sort (cub/), in
# test/cuda_emu/inc; their
# kernel launches are rewritten
# into emu_launch(...), and they run against the CPU backend (fused_emu.cpp, xent_act_emu.cpp,
# embed_emu.cpp, rope_emu.cpp, attention_tc_emu.cpp). Needs g++ with C++20 and `make` done first (links build/libmtrain.a).
# Usage: test/cuda_emu/run.sh [--quick]  (exit 0 = all ok)
set -eu
cd "$(dirname "$0")/../.."
out=build/cuda_emu
mkdir -p "$out"
[ -f build/libmtrain.a ] || { echo "cuda_emu: build/libmtrain.a missing: run make first" >&2; exit 2; }
host_copy() { # host_copy SRC.cu DST.cpp N_LAUNCHES: the file with its kernel launches rewritten
  sed -e 's/extern __shared__ __align__(128) unsigned char fa_smem\[\];/unsigned char *fa_smem = emu_dyn_smem();/' \
      -e 's/\([A-Za-z_][A-Za-z0-9_]*\(<[A-Za-z0-9_]*>\)\{0,1\}\)<<<\(.*\)>>>(/emu_launch(\3, \1, /' "$1" >"$2"
  local n; n=$(grep -c 'emu_launch(' "$2" || true)
  [ "$n" -eq "$3" ] || { echo "cuda_emu: $1: expected $3 kernel launches to rewrite, found $n" >&2; exit 1; }
  if grep -q '<<<' "$2"; then echo "cuda_emu: $1: a launch was not rewritten" >&2; exit 1; fi
}
host_copy cuda/cuda_attention_mma.cu "$out/attention_mma_host.cpp" 3
host_copy cuda/cuda_xent.cu "$out/xent_host.cpp" 4
host_copy cuda/cuda_act.cu "$out/act_host.cpp" 7
host_copy cuda/cuda_layernorm.cu "$out/layernorm_host.cpp" 5
host_copy cuda/cuda_init.cu "$out/init_host.cpp" 1
host_copy cuda/cuda_embed.cu "$out/embed_host.cpp" 4
host_copy cuda/cuda_rope.cu "$out/rope_host.cpp" 1
CUDA_LIBS=""
if grep -q 'MT_HAVE_CUDA=1' build/.build-flags 2>/dev/null; then
  CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
  CUDA_LIBS="-L$CUDA_HOME/lib64 -lcudart -lcublasLt -lnccl -Wl,-rpath,$CUDA_HOME/lib64"
fi
rc=0
for t in fused_emu xent_act_emu embed_emu rope_emu attention_tc_emu; do
  # shellcheck disable=SC2086
  g++ -std=c++20 -O2 -g -Itest/cuda_emu/inc -I"$out" -I. $(pkg-config --cflags openblas) \
    -o "$out/$t" "test/cuda_emu/$t.cpp" build/libmtrain.a \
    $(pkg-config --libs yaml-0.1 openblas pmix) -fopenmp -lm -lpthread $CUDA_LIBS
  echo "== $t"
  "$out/$t" "$@" || rc=1
done
exit $rc
