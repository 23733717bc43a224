#!/usr/bin/env bash
# test/e2e/gpu_check_dry_run.sh — the GPU kit is self-contained, and its check runs from it on a
# CPU machine exactly as it will on the GPU machine, so the first GPU run cannot fail on plumbing:
#   1. scripts/gpu-kit.sh --from-build makes a kit (this build's binaries; 2-iteration saves for
#      the Hugging Face part, to stay cheap) in a temporary folder; its CPU reference losses must
#      be found by the unpacked kit (the arguments they were made with match, wherever data/ lies);
#   2. in a bare box — a mount namespace (unshare -m) where every system copy of the libraries the
#      kit ships (libyaml, OpenBLAS, PMIx and their dependencies, the GCC runtime's libgomp /
#      libgfortran / libquadmath) is replaced by an empty file, and the -dev packages' headers,
#      pkg-config files and pkg-config itself are gone — `bash KIT/run.sh --dry-run --out OUT`
#      unpacks the kit and runs its gpu-check.sh: the host binaries start from the kit's lib/
#      (and lib/runtime/, which the empty system copies make necessary), every run's arguments
#      pass `mtrain check`, a short CPU run's metrics parse, the PyTorch peer and the transformers
#      check parse their inputs, the GEMM benchmark's rows (on the CPU backend) parse, the GPU steps say
#      "skipped: dry run";
#   3. at most 8 files come back in OUT (the device tool's limit; it writes 3), the report is
#      valid JSON, and the last lines printed are the summary table;
#   4. the GPU run itself runs to its end here, with a stand-in nvcc (copying this build's objects):
#      the module's C files compile and it links against the toolkit's libraries, every step
#      reports (those needing a GPU fail), a complete report comes back;
#   5. a missing corpus fails, naming the file and the fix (a dry run from a copy of the unpacked kit
#      without it, run beside step 4).
# Where no mount namespace can be made (not root, no CAP_SYS_ADMIN), step 2 runs without the bare
# box and the test exits 77 (skip) after every other check, saying why.
set -u
source test/e2e_lib.sh
need_data
for f in data/kjv.jsonl data/gpt2-vocab.json data/gpt2-merges.txt; do
  [ -f "$f" ] || { echo "skipped: $f missing (make test fetches it)"; exit 77; }
done
grep -q 'MT_HAVE_CUDA=1' build/.build-flags 2>/dev/null || { echo "skipped: built without the CUDA backend (no nvcc): no kit to make"; exit 77; }
t0=$(date +%s)
export GPU_CHECK_LOSS_ITERS=4 # the CPU reference's plumbing at a tenth of its cost (kit and check alike)
# the check's Python (PYTHON, default python3) is the system's: a version-manager shim on PATH costs ~0.5 s a
# start here, and the three runs below start Python some 30 times; neither has torch, so the paths are the same
[ -x /usr/bin/python3 ] && export PYTHON=/usr/bin/python3

GPU_KIT_STAGE="$TMP/stage" GPU_KIT_GZIP_LEVEL=1 scripts/gpu-kit.sh --from-build --hf-iters 2 --out "$TMP/kit" >"$TMP/kit.log" 2>&1 ||
  { cat "$TMP/kit.log"; fail "scripts/gpu-kit.sh failed"; }
echo "$(tail -n 1 "$TMP/kit.log") ($(( $(date +%s) - t0 )) s)"
for f in run.sh payload.tar.gz MANIFEST; do [ -s "$TMP/kit/$f" ] || fail "the kit has no $f"; done
size=$(du -cb "$TMP/kit" | tail -n 1 | cut -f1)
[ "$size" -lt $((48 * 1024 * 1024)) ] || fail "the kit is $size bytes: over 48 MiB (64 MiB travel with the source tree)"
tar -tzf "$TMP/kit/payload.tar.gz" >"$TMP/payload.list"
for f in ./bin/mtrain ./bin/test_cuda_parity ./bin/bench_cuda_gemm ./lib/libyaml-0.so.2 ./lib/libopenblas.so.0 ./lib/libpmix.so.2 \
         ./lib/runtime/libgomp.so.1 ./licenses/libyaml-0-2.copyright ./licenses/libopenblas0-pthread.copyright \
         ./src/cuda/cuda_attention_mma.cu ./src/nccl_stub.c ./src/obj/comm_nccl.o ./data/kjv_gpt2_text_document.bin \
         ./data/hf-check/gpt-tiny/config.json ./peers/torch_peer.py ./peers/fp8_gemm.py ./peers/attn_rate.py ./gpu-check.sh; do
  grep -qxF "$f" "$TMP/payload.list" || fail "the kit's payload has no $f"
done
n_lic=$(grep -c '^\./licenses/.' "$TMP/payload.list"); n_lib=$(grep -c '^\./lib/.*\.so' "$TMP/payload.list")
[ "$n_lic" -ge 8 ] && [ "$n_lib" -eq "$(grep -c '^  lib' "$TMP/kit/MANIFEST")" ] ||
  fail "$n_lib libraries, $n_lic licence files, $(grep -c '^  lib' "$TMP/kit/MANIFEST") MANIFEST rows: every shipped library needs its package's licence and a MANIFEST row"

# the bare box: the system's copies of what the kit ships, and the -dev files, hidden
cat >"$TMP/bare.sh" <<'EOF'
set -u
hide() { # hide PATH: an empty file (or an empty folder) mounted over it
  local p; p=$(readlink -f "$1") || return 0
  [ -e "$p" ] || return 0
  if [ -d "$p" ]; then mount -t tmpfs -o size=1m none "$p"; else mount --bind "$EMPTY" "$p"; fi || { echo "bare box: cannot hide $p" >&2; exit 3; }
}
for so in libyaml-0.so.2 libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libgomp.so.1 libmunge.so.2 \
          libevent_core-2.1.so.7 libevent_pthreads-2.1.so.7 libhwloc.so.15 libudev.so.1; do
  for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu; do [ -e "$d/$so" ] && hide "$d/$so"; done
done
hide /usr/lib/x86_64-linux-gnu/openblas-pthread
hide /usr/lib/x86_64-linux-gnu/pmix2
hide /usr/lib/x86_64-linux-gnu/pkgconfig
hide /usr/include/yaml.h
hide /usr/include/x86_64-linux-gnu/openblas-pthread
hide "$(command -v pkg-config || echo /nonexistent)"
# the box is bare: the system's libyaml cannot load, no -dev file is left
[ ! -s "$(readlink -f /usr/lib/x86_64-linux-gnu/libyaml-0.so.2)" ] || { echo "bare box: libyaml still there" >&2; exit 3; }
[ ! -s /usr/include/yaml.h ] && ! pkg-config --exists yaml-0.1 2>/dev/null || { echo "bare box: -dev files still there" >&2; exit 3; }
echo "bare box: system copies of the shipped libraries and the -dev files hidden"
exec "$@"
EOF
: >"$TMP/empty"
DRY=(bash "$TMP/kit/run.sh" --dry-run --out "$TMP/out" --work "$TMP/work")
bare=1; why=""
if unshare -m true 2>"$TMP/unshare.err"; then
  MT_KIT_DIR="$TMP/unpacked" EMPTY="$TMP/empty" unshare -m bash "$TMP/bare.sh" "${DRY[@]}" >"$TMP/dry.log" 2>&1
  rc=$?
else
  bare=0; why=$(head -n 1 "$TMP/unshare.err")
  MT_KIT_DIR="$TMP/unpacked" "${DRY[@]}" >"$TMP/dry.log" 2>&1
  rc=$?
fi
cat "$TMP/dry.log"
echo "dry run done at $(( $(date +%s) - t0 )) s"
[ $rc -eq 0 ] || fail "the kit's --dry-run exited $rc"
[ $bare -eq 0 ] || grep -q '^bare box: system copies' "$TMP/dry.log" || fail "the bare box was not set up"
grep -q '^gpu-check (dry, kit '"$TMP"'/unpacked)' "$TMP/dry.log" || fail "the dry run did not run from the unpacked kit"

# what comes back: at most 8 files, no deeper than 2 folders; the report; the summary printed last
n_out=$(find "$TMP/out" -type f | wc -l)
[ "$n_out" -le 8 ] || fail "$n_out files under --out: at most 8 come back from the GPU machine"
find "$TMP/out" -mindepth 3 -type f | grep -q . && fail "files deeper than 2 folders under --out do not come back"
R="$TMP/out/gpu-check.json"
for f in "$R" "$TMP/out/gpu-check-summary.txt" "$TMP/out/gpu-check-logs.tar.gz"; do [ -s "$f" ] || fail "no $f"; done
[ "$(tail -n 1 "$TMP/dry.log")" = "$(tail -n 1 "$TMP/out/gpu-check-summary.txt")" ] || fail "the last line printed is not the summary table's"
tar -tzf "$TMP/out/gpu-check-logs.tar.gz" | grep -q 'logs/plumbing.log' || fail "the log tarball lacks plumbing.log"
/usr/bin/python3 - "$R" <<'PY' || fail "the report is not the expected JSON"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["mode"] == "dry" and r["result"] == "pass" and r["failures"] == 0 and r["complete"] is True, r
steps = ["build", "parity", "loss", "hf_logprobs", "peer_gpt125m", "throughput_gpt125m", "peer_gpt1.3b",
         "throughput_gpt1.3b", "ops_gpt125m", "ops_gpt1.3b", "gemm", "fp8_gemm", "attention", "nccl", "sanitizer"]
assert sorted(r["steps"]) == sorted(steps), r["steps"].keys()
assert all(r["steps"][s]["status"].startswith("skipped: dry run") for s in steps), r["steps"]
assert "nvcc" in r["steps"]["build"]["commands"] or "cp obj/" in r["steps"]["build"]["commands"]
c = r["checks"]
for n in ["LOSS_ARGS", "SAN_TINY", "SAN_LLAMA", "SAN_MOE", "TP_125M", "TP_13B"]:
    assert c["recipe " + n]["status"] == "pass", c
for n in ["data", "cpu_reference", "parsers", "plan_compare", "gemm", "fp8_gemm", "attention", "hf_inputs", "host-libraries", "peer PEER_125M",
          "peer PEER_13B"]:
    assert c[n]["status"] == "pass", (n, c[n])
PY
if [ $bare -eq 1 ]; then
  grep -q 'check host-libraries *pass (lib/ .* + lib/runtime/ for ' "$TMP/dry.log" ||
    fail "in the bare box the GCC runtime must come from the kit's lib/runtime/"
fi

# the GPU run's own code, here: a stand-in nvcc that copies this build's object of each .cu, so the
# module's C files compile and the module links against the toolkit's libraries for real, and every
# step runs; with no GPU those that need one fail, but the script must reach its end: a complete
# report with every step, the summary printed last, at most 8 files
mkdir -p "$TMP/fakebin"
cat >"$TMP/fakebin/nvcc" <<EOF
#!/bin/bash
src=""; out=""
while [ \$# -gt 0 ]; do case "\$1" in -c) src=\$2; shift;; -o) out=\$2; shift;; --version) echo "release 13.0"; exit 0;; esac; shift; done
cp "$PWD/build/cuda/\$(basename "\$src" .cu).o" "\$out"
EOF
chmod +x "$TMP/fakebin/nvcc"
GPU=(bash "$TMP/unpacked/gpu-check.sh" --out "$TMP/gout" --work "$TMP/gwork" --budget-s 200) # unpacked by the dry run
# meanwhile (step 5, independent of it): a dry run from a copy of the unpacked kit that lacks the BPE corpus
cp -a "$TMP/unpacked" "$TMP/unpacked2" && rm "$TMP/unpacked2/data/kjv_gpt2_text_document.idx" || fail "cannot copy the unpacked kit"
bash "$TMP/unpacked2/gpu-check.sh" --dry-run --out "$TMP/out2" --work "$TMP/work2" >"$TMP/dry2.log" 2>&1 &
corpus_pid=$!
if [ $bare -eq 1 ]; then
  PATH="$TMP/fakebin:$PATH" EMPTY="$TMP/empty" unshare -m bash "$TMP/bare.sh" "${GPU[@]}" >"$TMP/gpu.log" 2>&1
else
  PATH="$TMP/fakebin:$PATH" "${GPU[@]}" >"$TMP/gpu.log" 2>&1
fi
rc=$?
[ $rc -eq 1 ] || { cat "$TMP/gpu.log"; fail "the GPU run without a GPU exited $rc, expected 1 (steps failed, script complete)"; }
[ "$(find "$TMP/gout" -type f | wc -l)" -le 8 ] || fail "more than 8 files under the GPU run's --out"
[ "$(tail -n 1 "$TMP/gpu.log")" = "$(tail -n 1 "$TMP/gout/gpu-check-summary.txt")" ] || { cat "$TMP/gpu.log"; fail "the GPU run's last line printed is not the summary table's"; }
/usr/bin/python3 - "$TMP/gout/gpu-check.json" <<'PY' || { cat "$TMP/gpu.log"; fail "the GPU run's report is not the expected JSON"; }
import json, sys
r = json.load(open(sys.argv[1]))
assert r["mode"] == "gpu" and r["complete"] is True and r["result"] == "fail", r
s = r["steps"]
assert sorted(s) == sorted(["build", "parity", "loss", "hf_logprobs", "peer_gpt125m", "throughput_gpt125m",
                            "peer_gpt1.3b", "throughput_gpt1.3b", "ops_gpt125m", "ops_gpt1.3b", "gemm", "fp8_gemm",
                            "attention", "nccl", "sanitizer"]), s.keys()
assert s["gemm"]["status"].startswith("fail"), s["gemm"] # no GPU here: the benchmark skips, which a GPU run must not
assert s["build"]["status"].startswith("pass") and s["build"]["module"] == "built here", s["build"]
assert s["parity"]["status"].startswith("fail") and s["loss"]["status"].startswith("fail"), s
assert s["peer_gpt125m"]["status"] == "skipped: torch is not installed", s["peer_gpt125m"]
assert s["fp8_gemm"]["status"] == "skipped: torch is not installed", s["fp8_gemm"]
assert s["attention"]["status"].startswith("skipped: torch"), s["attention"]
PY
echo "at $(( $(date +%s) - t0 )) s: GPU run without a GPU: complete, $(grep -c '"status": "fail' "$TMP/gout/gpu-check.json") steps failed as expected, module built and linked"

# a missing corpus (the dry run started beside the GPU run): non-zero, the file and the fix named,
# the report says fail
wait $corpus_pid && fail "--dry-run passed without the BPE corpus"
grep -q "kjv_gpt2_text_document.idx" "$TMP/dry2.log" && grep -q "make gpu-kit" "$TMP/dry2.log" ||
  { cat "$TMP/dry2.log"; fail "the missing-corpus message names neither the file nor make gpu-kit"; }
grep -q '"result": "fail"' "$TMP/out2/gpu-check.json" || fail "the failed dry run's report does not say fail"
echo "gpu_check_dry_run: ok ($(( $(date +%s) - t0 )) s; kit $size bytes)"
if [ $bare -eq 0 ]; then echo "skipped: the bare box (no mount namespace: $why); every other check passed"; exit 77; fi
