#!/usr/bin/env bash
# include_layers.sh — the include graph follows the declared layers, so dependencies point one
# way (docs/architecture.md). A file may include headers of its own folder or of a folder in a
# LOWER layer; never one of the same layer's other folders or of a layer above.
#   0 core/            status, dtypes, backend interface, rng, clock, json, files
#   1 core/recipe      YAML -> recipe, keys, validation
#   2 core/model       parameter / activation layout (pure), FLOPs, the ops a model needs
#   2 core/data        datasets, sampling, tokenizers, preprocess
#   2 core/cpu cuda/   the two backends
#   3 core/plan        the planner (calls core/model)
#   4 parallel/        grid, bootstrap, communicators, parallel state, tp layers, grad sync, schedules
#   5 train/           model fwd/bwd, pipeline executor, optimizer step, training loop, metrics
#   6 cmd/             the command line
# Also fails when a source file sits in a folder that has no layer (add it here and to the doc).
set -u
cd "$(dirname "$0")/../.."
layer_of() {
  case "$1" in
    core/recipe) echo 1 ;; core/model|core/data|core/cpu|cuda) echo 2 ;; core/plan) echo 3 ;;
    core) echo 0 ;; parallel) echo 4 ;; train) echo 5 ;; cmd) echo 6 ;; *) echo -1 ;;
  esac
}
bad=0; n=0
while IFS= read -r f; do
  src_dir=$(dirname "$f"); src_layer=$(layer_of "$src_dir")
  if [ "$src_layer" -lt 0 ]; then echo "$f: folder $src_dir has no layer in test/e2e/include_layers.sh"; bad=$((bad+1)); continue; fi
  while IFS= read -r line; do
    inc=$(sed -E 's/^#include "([^"]+)".*/\1/' <<<"$line")
    n=$((n+1))
    case "$inc" in *.c) continue ;; esac
    if [ ! -f "$inc" ]; then echo "$f: #include \"$inc\" is not a repository-root path of an existing header"; bad=$((bad+1)); continue; fi
    dst_dir=$(dirname "$inc"); dst_layer=$(layer_of "$dst_dir")
    if [ "$dst_dir" = "$src_dir" ]; then continue; fi
    if [ "$dst_layer" -lt 0 ] || [ "$dst_layer" -ge "$src_layer" ]; then
      echo "$f (layer $src_layer, $src_dir) includes $inc (layer $dst_layer, $dst_dir): a header of the same or a higher layer"
      bad=$((bad+1))
    fi
  done < <(grep -E '^#include "' "$f")
done < <(find core parallel train cmd cuda -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' | sort)
echo "include_layers: $n includes checked, $bad violations"
[ "$bad" -eq 0 ]
