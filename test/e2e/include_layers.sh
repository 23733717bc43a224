#!/usr/bin/env bash
# include_layers.sh — the include graph follows the declared layers, so dependencies point one
# way. The layers are declared here (layer_of below). A file may include headers of its own
# folder or of a folder in a LOWER layer; never one of the same layer's other folders or of a
# layer above.
#   0 core/            status, dtypes, backend interface, rng, clock, json, files
#   1 core/recipe      YAML -> recipe, keys, validation
#   2 core/model       parameter / activation layout (pure), FLOPs, the ops a model needs
#   2 core/data        datasets, sampling, tokenizers, preprocess
#   2 core/cpu cuda/   the two backends
#   3 core/ckpt        checkpoint geometry (pure), manifest, safetensors, folder layout
#   4 parallel/        grid, bootstrap, communicators, parallel state, tp layers, grad sync, schedules
#   5 train/           model fwd/bwd, pipeline executor, optimizer step, training loop, metrics
#   5 plan/            the planner: counts, memory, cost model, search, schedule simulator and timeline,
#                      device probe, plan-vs-run comparison (reads core/model and parallel/schedule)
#   6 cmd/             the command line
# Also fails when a source file sits in a folder that has no layer (add it here).
# Usage: include_layers.sh [ROOT]   checks the tree at ROOT (default: this repository).
# Without ROOT it also checks itself, so it cannot pass by checking nothing: a copy of the source
# folders with two planted violations (a core/ file including train/model.h, a parallel/ file
# including train/train.h) must fail naming both files, and the real tree must pass.
# Only bash builtins in the loops: a few hundred includes are checked in well under a second.
set -u
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
root="${1:-$(dirname "$0")/../..}"
cd "$root" || { echo "include_layers: cannot enter $root"; exit 2; }
SRC_DIRS=(core parallel plan train cmd cuda)

layer=-1
layer_of() { # layer_of DIR: sets layer
  case "$1" in
    core/recipe) layer=1 ;; core/model|core/data|core/cpu|cuda) layer=2 ;; core/ckpt) layer=3 ;;
    core) layer=0 ;; parallel) layer=4 ;; train|plan) layer=5 ;; cmd) layer=6 ;; *) layer=-1 ;;
  esac
}
check_tree() { # check_tree: every source file under SRC_DIRS of the current directory
  local bad=0 n=0 f src_dir src_layer line inc dst_dir re='^#include "([^"]+)"'
  while IFS= read -r f; do
    src_dir=${f%/*}; layer_of "$src_dir"; src_layer=$layer
    if [ "$src_layer" -lt 0 ]; then echo "$f: folder $src_dir has no layer in test/e2e/include_layers.sh"; bad=$((bad+1)); continue; fi
    while IFS= read -r line || [ -n "$line" ]; do
      [[ "$line" =~ $re ]] || continue
      inc=${BASH_REMATCH[1]}
      n=$((n+1))
      case "$inc" in *.c) continue ;; esac
      if [ ! -f "$inc" ]; then echo "$f: #include \"$inc\" is not a repository-root path of an existing header"; bad=$((bad+1)); continue; fi
      case "$inc" in */*) dst_dir=${inc%/*} ;; *) dst_dir=. ;; esac
      if [ "$dst_dir" = "$src_dir" ]; then continue; fi
      layer_of "$dst_dir"
      if [ "$layer" -lt 0 ] || [ "$layer" -ge "$src_layer" ]; then
        echo "$f (layer $src_layer, $src_dir) includes $inc (layer $layer, $dst_dir): a header of the same or a higher layer"
        bad=$((bad+1))
      fi
    done <"$f"
  done < <(find "${SRC_DIRS[@]}" \( -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | LC_ALL=C sort)
  echo "include_layers: $n includes checked, $bad violations"
  [ "$n" -gt 0 ] || { echo "include_layers: no includes found under ${SRC_DIRS[*]}: nothing was checked"; return 1; }
  [ "$bad" -eq 0 ]
}

if [ $# -gt 0 ]; then check_tree; exit; fi

# self-check on a copy with planted violations (the first lines of a real core/ and parallel/ file)
tmp=$(mktemp -d /tmp/mt_include_layers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp -r "${SRC_DIRS[@]}" "$tmp/" 2>/dev/null
[ -f "$tmp/core/rng.c" ] && [ -f "$tmp/parallel/grid.c" ] || { echo "FAIL: self-check: core/rng.c or parallel/grid.c missing"; exit 1; }
sed -i '1i #include "train/model.h"' "$tmp/core/rng.c"
sed -i '1i #include "train/train.h"' "$tmp/parallel/grid.c"
if bash "$self" "$tmp" >"$tmp/planted.out" 2>&1; then
  sed 's/^/  | /' "$tmp/planted.out"; echo "FAIL: self-check: a tree with planted violations passed"; exit 1
fi
for want in "core/rng.c (layer 0, core) includes train/model.h" "parallel/grid.c (layer 4, parallel) includes train/train.h"; do
  grep -qF "$want" "$tmp/planted.out" || { sed 's/^/  | /' "$tmp/planted.out"; echo "FAIL: self-check: no line '$want'"; exit 1; }
done
grep -q "^include_layers: [0-9]* includes checked, 2 violations$" "$tmp/planted.out" ||
  { sed 's/^/  | /' "$tmp/planted.out"; echo "FAIL: self-check: expected exactly the 2 planted violations"; exit 1; }
echo "self-check: the copy with 2 planted violations fails naming core/rng.c and parallel/grid.c"
check_tree
