#!/usr/bin/env bash
# test/bench_ckpt.sh — `make bench`: checkpoint save and load throughput for a gpt125m-shaped model
# with its optimizer state (fp32 weights + Adam m and v: 12 bytes per parameter, ~1.5 GB), beside
# this disk's own sequential write speed with fsync measured in the same run (dd conv=fsync, the
# same size), and the training stall a save leaves (the loop waits for the whole save). Runs on the
# disk that holds TMPDIR (default /tmp). Speeds are quoted against the dd row of the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
MTRAIN=./mtrain
DATA=data/kjv_text_document
out=$(mktemp -d "${TMPDIR:-/tmp}/mtrain-bench-ckpt.XXXXXX"); trap 'rm -rf "$out"' EXIT
ARGS=(--config configs/gpt125m.yaml --set data.path=$DATA --set logging.eval_interval=0 --backend cpu
      --set training.micro_batch=1 --set training.global_batch=1 --seq-length 64 --set training.precision=fp32
      --set logging.interval=1 --set checkpoint.dir="$out/ck")
"$MTRAIN" "${ARGS[@]}" --train-iters 2 --set checkpoint.save_interval=1 >"$out/save.log" 2>&1 || { cat "$out/save.log"; exit 1; }
bytes=$(du -sb "$out/ck/iter_0000002" | cut -f1)
mib=$((bytes / 1048576))
n_files=$(ls "$out/ck/iter_0000002" | wc -l)
# the disk: the same number of bytes, sequential, fsynced (what a save must at least pay)
dd_line=$(dd if=/dev/zero of="$out/dd" bs=1M count=$mib conv=fsync 2>&1 | tail -n 1)
rm -f "$out/dd"
dd_s=$(sed -E 's/.*, ([0-9.]+) s, .*/\1/' <<<"$dd_line")
"$MTRAIN" "${ARGS[@]}" --train-iters 3 --set checkpoint.save_interval=0 --set checkpoint.dir= \
  --set checkpoint.load="$out/ck" >"$out/load.log" 2>&1 || { cat "$out/load.log"; exit 1; }
sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true  # a cold load when allowed (root)
"$MTRAIN" "${ARGS[@]}" --train-iters 3 --set checkpoint.save_interval=0 --set checkpoint.dir= \
  --set checkpoint.load="$out/ck" >"$out/load_cold.log" 2>&1 || { cat "$out/load_cold.log"; exit 1; }
save2=$(grep "saved checkpoint at iteration 2" "$out/save.log")
save_s=$(sed -E 's/.* in ([0-9.]+) s .*/\1/' <<<"$save2")
snap_s=$(sed -E 's/.*snapshot ([0-9.]+) s.*/\1/' <<<"$save2")
load_s=$(grep -o 'loaded checkpoint .*; [0-9.]* s' "$out/load.log" | sed -E 's/.*; ([0-9.]+) s$/\1/')
cold_s=$(grep -o 'loaded checkpoint .*; [0-9.]* s' "$out/load_cold.log" | sed -E 's/.*; ([0-9.]+) s$/\1/')
iter_ms=$(grep "iteration        2/" "$out/save.log" | sed -E 's/.*elapsed time per iteration \(ms\): ([0-9.]+).*/\1/')
# export to Hugging Face: the fp32 weights of the same save, merged into
# one model.safetensors (shards past 5GB) + config and tokenizer files, fsynced; MiB/s of the output
ex() { # ex DTYPE: seconds and MiB written by `mtrain export --dtype DTYPE`
  local t0 t1; rm -rf "$out/hf"; t0=$(date +%s.%N)
  "$MTRAIN" export --load "$out/ck" --output "$out/hf" --dtype "$1" >"$out/export.log" 2>&1 || { cat "$out/export.log"; exit 1; }
  t1=$(date +%s.%N); echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}') $(( $(du -sb "$out/hf" | cut -f1) / 1048576 ))"
}
read -r exp32_s exp32_mib <<<"$(ex fp32)"
read -r exp16_s exp16_mib <<<"$(ex bf16)"
rm -rf "$out/hf"
# asynchronous: the save of iteration 12 is written in the background while iterations 13.. run (the
# run's last save is synchronous by design); 11 iterations leave the writer the time a save takes
rm -rf "$out/ck"
"$MTRAIN" "${ARGS[@]}" --train-iters 24 --set checkpoint.save_interval=12 --set checkpoint.async_save=true \
  --set checkpoint.keep=1 >"$out/async.log" 2>&1 || { cat "$out/async.log"; exit 1; }
async_line=$(grep "saved checkpoint at iteration .*written in the background" "$out/async.log" | sed -n 1p)
[ -n "$async_line" ] || { cat "$out/async.log"; echo "bench_ckpt: no asynchronous save finished"; exit 1; }
async_stall=$(sed -E 's/.*training stalled ([0-9.]+) s.*/\1/' <<<"$async_line")
async_total=$(sed -E 's/.* in ([0-9.]+) s .*/\1/' <<<"$async_line")
echo "checkpoint of gpt125m (fp32 weights + Adam state), $mib MiB in $n_files files, on $(df -h "$out" | tail -n 1 | awk '{print $1}')"
printf '| %-44s | %10s | %10s | %14s |\n' "operation" "seconds" "MiB/s" "vs dd+fsync"
printf '|%s|%s|%s|%s|\n' "----------------------------------------------" "------------" "------------" "----------------"
r() { awk -v m="$mib" -v s="$2" -v d="$dd_s" -v n="$1" 'BEGIN { printf "| %-44s | %10.2f | %10.0f | %13.2fx |\n", n, s, m / s, d / s }'; }
r "dd bs=1M conv=fsync (the disk)" "$dd_s"
r "save: snapshot + write + fsync + publish" "$save_s"
r "load (page cache warm), CRC-32C verified" "$load_s"
r "load (caches dropped when allowed)" "$cold_s"
rx() { awk -v m="$2" -v s="$3" -v d="$dd_s" -v dm="$mib" -v n="$1" 'BEGIN { printf "| %-44s | %10.2f | %10.0f | %13.2fx |\n", n, s, m / s, (m / s) / (dm / d) }'; }
rx "export hf fp32 ($exp32_mib MiB written)" "$exp32_mib" "$exp32_s"
rx "export hf bf16 ($exp16_mib MiB written)" "$exp16_mib" "$exp16_s"
awk -v s="$save_s" -v sn="$snap_s" -v it="$iter_ms" 'BEGIN { printf "training stall per synchronous save: %.2f s (snapshot into host memory %.2f s of it) = %.1f iterations of %.0f ms at this shape\n", s, sn, s * 1000 / it, it }'
awk -v s="$async_stall" -v t="$async_total" -v y="$save_s" 'BEGIN { printf "training stall per asynchronous save (checkpoint.async_save): %.2f s = %.0f%% of the synchronous stall; published %.2f s after it began\n", s, 100 * s / y, t }'
