#!/usr/bin/env bash
# scripts/gpu-kit.sh — makes the GPU kit on a CPU machine (`make gpu-kit`): everything one lent GPU
# machine needs to run scripts/gpu-check.sh with nothing installed there but its CUDA + PyTorch
# image, in one git-ignored folder (default gpu-kit/) that travels to it:
#
#   gpu-kit/run.sh            unpacks the payload (to $MT_KIT_DIR, default /tmp/mtrain-gpu-kit)
#                             and runs its gpu-check.sh with the arguments given
#   gpu-kit/payload.tar.gz    bin/ (mtrain, the three GPU test programs and bench_cuda_gemm, built here for
#                             x86-64-v3, any glibc >= the one named in MANIFEST), lib/ (the Debian
#                             shared libraries they need that a CUDA image lacks, unpacked with
#                             dpkg -x from the packages apt-get download fetches; lib/runtime/: the
#                             GCC runtime, used only where the machine has none), licenses/ (each
#                             package's copyright file), module/libmtrain_cuda.so (the CUDA module
#                             built here, the fallback when the one built there fails), src/ (the
#                             CUDA module's sources, built there with that image's nvcc),
#                             data/ (both corpora, the GPT-2 tokenizer files, gpt-tiny's CPU
#                             reference losses, a gpt-tiny and a llama-tiny save's Hugging Face
#                             export with mtrain's fp32 log-probabilities of the golden prompts),
#                             configs/, peers/ (the PyTorch peer and the transformers check),
#                             gpu-check.sh, MANIFEST
#   gpu-kit/MANIFEST          what is inside, where each library came from, sizes
#
# Options: --out DIR (default gpu-kit), --from-build (use ./mtrain and build/test/ops/* as built,
# -march=native, instead of a portable build in build/gpu-kit-src: for tests on this machine),
# --skip-reference (no gpt-tiny CPU reference losses: the GPU run then computes them on its CPUs),
# --hf-iters N (training iterations of the saves the Hugging Face check exports; default 20).
# GPU_KIT_STAGE=DIR: where the kit is assembled (default build/gpu-kit-stage); GPU_KIT_GZIP_LEVEL
# (default 6; tests use 1: 7% larger, several times faster).
# Needs: make done (CUDA=1: the host binaries must know the CUDA module), data/ fetched (make test
# or scripts/fetch-corpus.sh + scripts/fetch-gpt2-tokenizer.sh), dpkg, apt-get (a package that
# cannot be downloaded is copied from this machine's installed files, and MANIFEST says so).
set -euo pipefail
cd "$(dirname "$0")/.."
KIT=gpu-kit; FROM_BUILD=0; SKIP_REF=0; HF_ITERS=20
while [ $# -gt 0 ]; do
  case "$1" in
    --out) KIT="${2:?--out needs a folder}"; shift ;;
    --from-build) FROM_BUILD=1 ;;
    --skip-reference) SKIP_REF=1 ;;
    --hf-iters) HF_ITERS="${2:?--hf-iters needs a count}"; shift ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    *) echo "gpu-kit: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
LIMIT_BYTES=$((48 * 1024 * 1024)) # of the 64 MiB that travel: the rest is the source tree
TEST_BINS="test_cuda_parity test_cuda_parity_train test_comm_nccl"
BENCH_BINS="bench_cuda_gemm" # build/test/NAME: the GEMM rates beside the planner's model (the gemm step)
MODULE_C_OBJ="build/module/parallel/comm_nccl.o build/module/parallel/cuda_module.o" # for a machine without nccl.h
say() { echo "gpu-kit: $*"; }
die() { echo "gpu-kit: error: $*" >&2; exit 1; }
grep -q 'MT_HAVE_CUDA=1' build/.build-flags 2>/dev/null ||
  die "build/ was not built with the CUDA backend (make CUDA=1 needs nvcc here): the kit's mtrain must open the CUDA module"
for f in kjv_text_document.bin kjv_text_document.idx kjv.jsonl gpt2-vocab.json gpt2-merges.txt; do
  [ -f "data/$f" ] || die "data/$f missing: run make test, or scripts/fetch-corpus.sh data and scripts/fetch-gpt2-tokenizer.sh data"
done

STAGE="${GPU_KIT_STAGE:-build/gpu-kit-stage}"
rm -rf "$STAGE"; mkdir -p "$STAGE"/{bin,lib/runtime,licenses,module,src,data/gpu-check,peers}
MANIFEST="$STAGE/MANIFEST"
{ echo "mtrain GPU kit, made $(date -u +%Y-%m-%dT%H:%M:%SZ) from commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "made on: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), $(ldd --version | head -n 1)"; } >"$MANIFEST"

# ---- 1. host binaries ----
if [ $FROM_BUILD -eq 1 ]; then
  BIN_SRC=.; echo "binaries: this tree's build (-march=native: for tests on this machine only)" >>"$MANIFEST"
else
  # a copy of the tree (tracked and untracked-not-ignored files; tar keeps their times, so make
  # rebuilds only what changed since the last kit) built for any x86-64-v3 processor
  BIN_SRC=build/gpu-kit-src
  mkdir -p "$BIN_SRC"
  git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$BIN_SRC"
  say "portable host build in $BIN_SRC (make -j$JOBS, -march=x86-64-v3)"
  nice make -C "$BIN_SRC" -j"$JOBS" --no-print-directory CUDA=1 CUDA_MODULE= OPT="-O3 -march=x86-64-v3 -mtune=generic" \
    mtrain $(for t in $TEST_BINS; do printf 'build/test/ops/%s ' "$t"; done) $(for t in $BENCH_BINS; do printf 'build/test/%s ' "$t"; done) \
    $MODULE_C_OBJ >"$STAGE/host-build.log" 2>&1 ||
    { tail -n 30 "$STAGE/host-build.log"; die "the portable host build failed (log $STAGE/host-build.log)"; }
  echo "binaries: built for -march=x86-64-v3 (make CUDA=1 OPT='-O3 -march=x86-64-v3 -mtune=generic')" >>"$MANIFEST"
fi
cp "$BIN_SRC/mtrain" "$STAGE/bin/"
for t in $TEST_BINS; do
  [ -x "$BIN_SRC/build/test/ops/$t" ] || die "$BIN_SRC/build/test/ops/$t missing: run make"
  cp "$BIN_SRC/build/test/ops/$t" "$STAGE/bin/"
done
for t in $BENCH_BINS; do
  [ -x "$BIN_SRC/build/test/$t" ] || make -C "$BIN_SRC" --no-print-directory "build/test/$t" >>"$STAGE/host-build.log" 2>&1 ||
    die "$BIN_SRC/build/test/$t: the build failed (log $STAGE/host-build.log)"
  cp "$BIN_SRC/build/test/$t" "$STAGE/bin/"
done
strip --strip-debug "$STAGE"/bin/*
echo "glibc needed: $(objdump -T "$STAGE"/bin/* | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)" >>"$MANIFEST"

# ---- 2. the Debian shared libraries they need (not glibc's own, not libgcc_s / libstdc++) ----
DEB_CACHE=build/gpu-kit-debs
mkdir -p "$DEB_CACHE"
is_base() { case "$1" in linux-vdso*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*|libgcc_s.so*|libstdc++.so*) return 0;; esac; return 1; }
is_runtime() { case "$1" in libgomp.so*|libgfortran.so*|libquadmath.so*) return 0;; esac; return 1; }
fetch_deb() { # fetch_deb NAME VERSION: the .deb in DEB_CACHE (downloaded once), or nothing; downloaded
  # into a folder of its own and renamed into the cache, so that two jobs fetching one package cannot
  # see half a file
  local deb t; deb=$(ls "$DEB_CACHE/${1}_"*.deb 2>/dev/null | head -n 1 || true)
  if [ -z "$deb" ]; then
    t=$(mktemp -d "$DEB_CACHE/dl.XXXXXX")
    (cd "$t" && timeout 120 apt-get download -q "$1=$2" >/dev/null 2>&1) || true
    for deb in "$t"/*.deb; do if [ -f "$deb" ]; then mv -f "$deb" "$DEB_CACHE/"; fi; done
    rm -rf "$t"
    deb=$(ls "$DEB_CACHE/${1}_"*.deb 2>/dev/null | head -n 1 || true)
  fi
  echo "$deb"
}
copyright_from_deb() { # copyright_from_deb NAME X_DIR DEST: the package's copyright file; where its doc
  # folder is a link to another package's (libgfortran5 -> gcc-12-base), that package's
  local name=$1 x=$2 dest=$3 t deb y
  if [ -f "$x/usr/share/doc/$name/copyright" ]; then cp "$x/usr/share/doc/$name/copyright" "$dest"; return; fi
  t=$(readlink "$x/usr/share/doc/$name" 2>/dev/null || true)
  [ -n "$t" ] || die "$name: no copyright file in its package"
  deb=$(fetch_deb "$t" "$(dpkg-query -W -f='${Version}' "$t" 2>/dev/null)")
  if [ -n "$deb" ]; then
    y=$(mktemp -d "$DEB_CACHE/x-$t.XXXXXX"); dpkg -x "$deb" "$y"; cp "$y/usr/share/doc/$t/copyright" "$dest"; rm -rf "$y"
  else
    cp -L "/usr/share/doc/$t/copyright" "$dest"
  fi
}
ship_lib() { # ship_lib SONAME PATH PKG: the library from its package into lib/ (or lib/runtime/), with the
  # package's copyright file; prints its MANIFEST row
  local soname=$1 path=$2 pkg=$3 name ver dest deb x real f src
  name=${pkg%%:*}
  ver=$(dpkg-query -W -f='${Version}' "$pkg")
  dest="$STAGE/lib"; is_runtime "$soname" && dest="$STAGE/lib/runtime"
  deb=$(fetch_deb "$name" "$ver")
  if [ -n "$deb" ]; then
    x=$(mktemp -d "$DEB_CACHE/x-$name.XXXXXX"); dpkg -x "$deb" "$x"
    real=$(basename "$(readlink -f "$path")")
    f=$(find "$x" -name "$real" -type f | head -n 1)
    [ -n "$f" ] || die "$deb holds no $real"
    cp "$f" "$dest/$soname"
    copyright_from_deb "$name" "$x" "$STAGE/licenses/$name.copyright"
    rm -rf "$x"
    src="dpkg -x $(basename "$deb")"
  else # no network: the installed copy (the same files the package holds)
    cp -L "$path" "$dest/$soname"
    cp "/usr/share/doc/$name/copyright" "$STAGE/licenses/$name.copyright"
    src="installed copy (apt-get download failed)"
  fi
  printf '  %-28s %-26s %-18s %s%s\n' "$soname" "$name" "$ver" "$src" "$([ "$dest" = "$STAGE/lib" ] || echo ', lib/runtime: used where the machine lacks it')"
}
echo "libraries (soname  package version  source):" >>"$MANIFEST"
LIBS=$(ldd "$STAGE"/bin/* | awk '/=>/ && $3 ~ /^\// {print $1, $3}' | sort -u)
# the package owning each library, from one dpkg -S call (each call reads the whole database); asked
# for the names dpkg may list it under: the path, the file its links name, and its usr-merged twin
owner_names() { printf '%s\n' "$1" "$(readlink -f "$1")" "${1/#\/lib\//\/usr\/lib\/}" "${1/#\/usr\/lib\//\/lib\/}"; }
declare -A OWNER
cands=()
while read -r soname path; do
  [ -n "$soname" ] && ! is_base "$soname" || continue
  mapfile -t -O "${#cands[@]}" cands < <(owner_names "$path")
done <<<"$LIBS"
while IFS= read -r line; do # "package:arch: /path" ("a, b: /path" where two packages list it)
  p=${line%%: /*}; OWNER[${line#*: }]=${p%%,*}
done < <(dpkg -S "${cands[@]}" 2>/dev/null || true)
# each library in a job of its own, JOBS at once; rows and errors in per-library files, in order after
ROWS=$(mktemp -d); n=0
while read -r soname path; do
  [ -n "$soname" ] && ! is_base "$soname" || continue
  pkg=""
  while read -r r; do [ -n "${OWNER[$r]:-}" ] && { pkg=${OWNER[$r]}; break; }; done < <(owner_names "$path")
  [ -n "$pkg" ] || die "no installed package owns $path ($soname)"
  n=$((n + 1)); row="$ROWS/$(printf '%03d' $n)"
  echo "gpu-kit: error: $soname ($path, $pkg): shipping it failed" >"$row.err"
  ( ship_lib "$soname" "$path" "$pkg" >"$row" 2>>"$row.err" </dev/null; rm -f "$row.err" ) & # set -e: a failed command ends the job
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
done <<<"$LIBS"
wait
if ls "$ROWS"/*.err >/dev/null 2>&1; then cat "$ROWS"/*.err >&2; rm -rf "$ROWS"; exit 1; fi
cat "$ROWS"/[0-9][0-9][0-9] >>"$MANIFEST"; rm -rf "$ROWS"
# libraries in lib/ must not need anything beyond lib/, glibc and the GCC runtime
miss=$(LD_LIBRARY_PATH="$STAGE/lib:$STAGE/lib/runtime" ldd "$STAGE"/lib/*.so* "$STAGE"/lib/runtime/*.so* 2>/dev/null | awk '/=>/ {print $1}' | sort -u |
  while read -r s; do is_base "$s" || [ -e "$STAGE/lib/$s" ] || [ -e "$STAGE/lib/runtime/$s" ] || echo "$s"; done)
[ -z "$miss" ] || die "the shipped libraries need more libraries than the binaries do: $miss"

# ---- 3. the CUDA module (prebuilt here: the fallback) and its sources ----
if [ -f build/libmtrain_cuda.so ]; then
  # this build's CUDA objects, linked as the Makefile links the module, with the module's two C
  # objects of the binaries' build (portable host code)
  # the link line make used for build/libmtrain_cuda.so (the Makefile writes it down); a build
  # older than that file: the toolkit beside nvcc as found on PATH, not its resolved path (a
  # toolkit whose bin/nvcc links elsewhere keeps its libraries beside the link)
  if [ -s build/.module-libs ]; then
    module_libs=$(cat build/.module-libs)
  else
    nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    module_libs="-L$(dirname "$(dirname "$nvcc_path")")/lib64 -L$(dirname "$(dirname "$(readlink -f "$nvcc_path")")")/lib64 -lcudart -lcublasLt -lnccl -lstdc++"
  fi
  # shellcheck disable=SC2086 # module_libs is a list of linker arguments
  # the objects of today's cuda/*.cu only (a stale object of a removed source would be linked in)
  cc -shared -o "$STAGE/module/libmtrain_cuda.so" $(for f in cuda/*.cu; do printf 'build/cuda/%s.o ' "$(basename "$f" .cu)"; done) \
    $(for o in $MODULE_C_OBJ; do printf '%s ' "$BIN_SRC/$o"; done) \
    $module_libs -Wl,-rpath,/usr/local/cuda/lib64 ||
    die "linking the prebuilt module failed (link arguments: $module_libs)"
  strip --strip-debug "$STAGE/module/libmtrain_cuda.so"
  echo "module/libmtrain_cuda.so: built here ($(sed -n 's/.*NVFLAGS=\(.*\) LDLIBS=.*/\1/p' build/.build-flags)), linked against $(ldd "$STAGE/module/libmtrain_cuda.so" | awk '/=>/ {print $1}' | grep -E 'cudart|cublas|nccl' | tr '\n' ' ')" >>"$MANIFEST"
fi
find cuda -name '*.cu' -o -name '*.cuh' | tar -cf - -T - parallel/comm_nccl.c parallel/cuda_module.c \
  $(find core parallel train -name '*.h') | tar -xf - -C "$STAGE/src"
cp scripts/gpu-kit/nccl_stub.c "$STAGE/src/"
mkdir -p "$STAGE/src/obj"
for o in $MODULE_C_OBJ; do
  [ -f "$BIN_SRC/$o" ] || die "$BIN_SRC/$o missing: run make"
  cp "$BIN_SRC/$o" "$STAGE/src/obj/"
done

# ---- 4. data: corpora, tokenizer, CPU reference losses, the Hugging Face check's inputs ----
if [ ! -f data/kjv_gpt2_text_document.idx ]; then
  MTRAIN="$STAGE/bin/mtrain" scripts/gpu-check.sh --prepare --skip-reference --data-dir data >"$STAGE/prepare.log" 2>&1 ||
    { tail -n 20 "$STAGE/prepare.log"; die "scripts/gpu-check.sh --prepare failed"; }
fi
for f in kjv_text_document.bin kjv_text_document.idx kjv_gpt2_text_document.bin kjv_gpt2_text_document.idx gpt2-vocab.json gpt2-merges.txt; do
  cp "data/$f" "$STAGE/data/"
done
cp -r configs "$STAGE/configs"
cp scripts/gpu-check.sh scripts/gpu-check-lib.sh "$STAGE/"
cp scripts/gpu-kit/torch_peer.py scripts/gpu-kit/hf_check.py scripts/gpu-kit/fp8_gemm.py scripts/gpu-kit/attn_rate.py scripts/gpu-kit/probe_io.py "$STAGE/peers/"
if [ $SKIP_REF -eq 0 ]; then
  (cd "$STAGE" && ./gpu-check.sh --prepare --data-dir data) >"$STAGE/reference.log" 2>&1 ||
    { tail -n 20 "$STAGE/reference.log"; die "the gpt-tiny CPU reference failed"; }
  echo "data/gpu-check: gpt-tiny CPU reference losses made with bin/mtrain" >>"$MANIFEST"
fi
# the Hugging Face check: a gpt-tiny and a llama-tiny (GQA, RoPE, SwiGLU) save trained 20
# iterations, its export, and mtrain's fp32 log-probabilities of the golden prompts
mkdir -p "$STAGE/data/hf-check"
for m in gpt-tiny llama-tiny; do
  ck="$STAGE/hf-$m.ckpt"
  (cd "$STAGE" && bin/mtrain --config "configs/$m.yaml" --data-path data/kjv_text_document --train-iters "$HF_ITERS" \
    --micro-batch-size 1 --global-batch-size 4 --lr 3e-3 --set optimizer.warmup_iters=0 --set logging.eval_interval=0 \
    --backend cpu --save "hf-$m.ckpt" &&
   bin/mtrain export --load "hf-$m.ckpt" --format hf --output "data/hf-check/$m" &&
   bin/mtrain logprobs --config "configs/$m.yaml" --load "hf-$m.ckpt" --prompts configs/golden_prompts.jsonl \
     --output "data/hf-check/$m.mtrain.jsonl") >"$STAGE/hf.log" 2>&1 ||
    { tail -n 20 "$STAGE/hf.log"; die "the Hugging Face check's inputs for $m failed"; }
  rm -rf "$ck"
done
echo "data/hf-check: gpt-tiny and llama-tiny saves ($HF_ITERS iterations) exported, with mtrain logprobs (CPU, fp32)" >>"$MANIFEST"
rm -f "$STAGE"/*.log

# ---- 5. pack ----
mkdir -p "$KIT"
rm -f "$KIT/payload.tar.gz" "$KIT/run.sh" "$KIT/MANIFEST"
{ echo "contents (bytes, unpacked):"; (cd "$STAGE" && du -sb bin lib licenses module src data configs peers | sed 's/^/  /'); } >>"$MANIFEST"
tar -C "$STAGE" -cf - . | gzip -"${GPU_KIT_GZIP_LEVEL:-6}" >"$KIT/payload.tar.gz"
cp scripts/gpu-kit/run.sh "$KIT/run.sh"
cp "$MANIFEST" "$KIT/MANIFEST"
size=$(du -cb "$KIT"/* | tail -n 1 | cut -f1)
echo "kit: $size bytes in $KIT/ (payload $(stat -c %s "$KIT/payload.tar.gz") bytes, gzip)" >>"$KIT/MANIFEST"
[ "$size" -le $LIMIT_BYTES ] || die "the kit is $size bytes, over $LIMIT_BYTES (64 MiB travel in all, the source tree included)"
say "$KIT/ ready: $size bytes ($(awk -v s="$size" 'BEGIN{printf "%.1f", s/1048576}') MiB); on the GPU machine: bash $KIT/run.sh --out \$OUT"
