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
# Axis layers (check_axes): each parallel axis's communicating layer lives in parallel/ and the
# model is built from the parallel state, so
#   - parallel/ holds the layers: tp_layers.c, cp_attention.c (the cp ring: p2p send / recv) and
#     ep_dispatch.c (the expert all-to-all), each calling its collectives;
#   - no train/model*.c file calls a collective (->i->allreduce, send, alltoallv, ...): the
#     model's communication is the axis layers'; no other train/ file calls alltoallv or takes
#     the communicator of a group an axis layer talks over (tp, cp, ep, etp). The pipeline
#     executor (train/pipeline.c) keeps its p2p: the pipeline axis has no layer inside a model,
#     it runs parts of it between stages;
#   - the model and the loop name no axis: train/model.h, train.h, train.c (with train_open.c and
#     train_internal.h), logprobs.c and generate.c hold no per-axis communicator, rank, stage or time field (tp_comm, cp_rank,
#     ep_comm, pp_stage, moe_comm_ms, tp_comm_ms_per_iter, ...), no model member named after an
#     axis (m->tp, model.cp), no collective counter, and ask the parallel state for no tp, cp, ep,
#     etp, pp or embedding group (MT_PG_TP ...): the model takes the state and its layers ask.
#     (The trainer still reads its data-parallel coordinate, dp_rank: which samples it reads; and
#     sizes of the layout for its log line: those are not communication fields.)
# Usage: include_layers.sh [ROOT]   checks the tree at ROOT (default: this repository).
# Without ROOT it also checks itself, so it cannot pass by checking nothing: a copy of the source
# folders with four planted violations (a core/ file including train/model.h, a parallel/ file
# including train/train.h, an ep_comm field in train/model.h, an alltoallv call in
# train/model_moe.c) must fail naming each, and the real tree must pass.
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

AXIS_FILES=(train/model.h train/train.h train/train.c train/train_open.c train/train_internal.h train/logprobs.c
            train/generate.c)
AXIS_RE='\b(tp|cp|ep|pp|etp|emb)_(comm|rank|stage|group)\b|\b(dp|edp)_(comm|group)\b|\b(moe|tp|cp|ep|pp|dp)_comm_ms|\bMT_PG_(TP|CP|EP|ETP|PP|EMB)\b|\b(m|model)(\.|->)(tp|cp|ep|pp)\b|\bn_coll\b'
COLL_RE='->i->(allreduce|reduce_scatter|allgather|broadcast|send|recv|group_start|group_end|alltoallv|barrier)\('
check_axes() { # check_axes: the axis layers' place and the axis-free model and loop (see the top)
  local bad=0 f hits
  for f in parallel/tp_layers.c parallel/cp_attention.c parallel/ep_dispatch.c; do
    [ -f "$f" ] || { echo "$f: missing (an axis's communicating layer lives in parallel/)"; bad=$((bad+1)); }
  done
  [ -f parallel/cp_attention.c ] && ! grep -qE -- '->i->send\(' parallel/cp_attention.c &&
    { echo "parallel/cp_attention.c: no p2p send: the cp ring is not here"; bad=$((bad+1)); }
  [ -f parallel/ep_dispatch.c ] && ! grep -qE -- '->i->alltoallv\(' parallel/ep_dispatch.c &&
    { echo "parallel/ep_dispatch.c: no alltoallv: the expert dispatch is not here"; bad=$((bad+1)); }
  for f in train/*.c; do
    case "$f" in
      train/model*.c) hits=$(grep -nE -- "$COLL_RE" "$f") ;;
      *) hits=$(grep -nE -- '->i->alltoallv\(|MT_PG_(TP|CP|EP|ETP)\)->comm\b' "$f") ;;
    esac
    [ -z "$hits" ] && continue
    while IFS= read -r line; do
      echo "$f:${line%%:*}: calls a collective an axis layer in parallel/ owns: ${line#*:}"; bad=$((bad+1))
    done <<<"$hits"
  done
  for f in "${AXIS_FILES[@]}"; do
    [ -f "$f" ] || { echo "$f: missing"; bad=$((bad+1)); continue; }
    hits=$(grep -nE -- "$AXIS_RE" "$f")
    [ -z "$hits" ] && continue
    while IFS= read -r line; do
      echo "$f:${line%%:*}: names an axis's communication field or group: $(grep -oE -- "$AXIS_RE" <<<"${line#*:}" | head -n 1)"
      bad=$((bad+1))
    done <<<"$hits"
  done
  echo "axis layers: $bad violations"
  [ "$bad" -eq 0 ]
}

if [ $# -gt 0 ]; then st=0; check_tree || st=1; check_axes || st=1; exit $st; fi

# self-check on a copy with planted violations (the first lines of a real core/ and parallel/ file)
tmp=$(mktemp -d /tmp/mt_include_layers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp -r "${SRC_DIRS[@]}" "$tmp/" 2>/dev/null
[ -f "$tmp/core/rng.c" ] && [ -f "$tmp/parallel/grid.c" ] || { echo "FAIL: self-check: core/rng.c or parallel/grid.c missing"; exit 1; }
sed -i '1i #include "train/model.h"' "$tmp/core/rng.c"
sed -i '1i #include "train/train.h"' "$tmp/parallel/grid.c"
sed -i '1i typedef struct { struct mt_comm *ep_comm; } planted_axis_field;' "$tmp/train/model.h"
sed -i '1i static void planted(mt_comm *c) { c->i->alltoallv(c, 0, 0, 0, 0, 0, 0, MT_F32); }' "$tmp/train/model_moe.c"
if bash "$self" "$tmp" >"$tmp/planted.out" 2>&1; then
  sed 's/^/  | /' "$tmp/planted.out"; echo "FAIL: self-check: a tree with planted violations passed"; exit 1
fi
for want in "core/rng.c (layer 0, core) includes train/model.h" "parallel/grid.c (layer 4, parallel) includes train/train.h" \
            "train/model.h:1: names an axis's communication field or group: ep_comm" \
            "train/model_moe.c:1: calls a collective an axis layer in parallel/ owns"; do
  grep -qF "$want" "$tmp/planted.out" || { sed 's/^/  | /' "$tmp/planted.out"; echo "FAIL: self-check: no line '$want'"; exit 1; }
done
grep -q "^include_layers: [0-9]* includes checked, 2 violations$" "$tmp/planted.out" &&
  grep -q "^axis layers: 2 violations$" "$tmp/planted.out" ||
  { sed 's/^/  | /' "$tmp/planted.out"; echo "FAIL: self-check: expected exactly the 4 planted violations"; exit 1; }
echo "self-check: the copy with 4 planted violations fails naming core/rng.c, parallel/grid.c, train/model.h and train/model_moe.c"
st=0
check_tree || st=1
check_axes || st=1
exit $st
