#!/usr/bin/env bash
# gpu-kit/run.sh — the GPU kit's entry point (copied there by scripts/gpu-kit.sh): unpacks
# payload.tar.gz beside it into $MT_KIT_DIR (default /tmp/mtrain-gpu-kit, emptied first) and runs
# the unpacked gpu-check.sh with this script's arguments. On the GPU machine:
#   bash gpu-kit/run.sh --out "$OUT"              the check (report, log tarball, summary in $OUT)
#   bash gpu-kit/run.sh --dry-run --out DIR       on a CPU machine: the same paths, GPU steps skipped
set -u
here=$(cd "$(dirname "$0")" && pwd)
dest="${MT_KIT_DIR:-/tmp/mtrain-gpu-kit}"
[ -f "$here/payload.tar.gz" ] || { echo "gpu-kit: $here/payload.tar.gz missing: make gpu-kit on a CPU machine first" >&2; exit 1; }
args=()
while [ $# -gt 0 ]; do # folders given relative to the caller's directory become absolute
  case "$1" in
    --out|--work|--report) args+=("$1" "$(realpath -m -- "${2:?$1 needs a value}")"); shift ;;
    *) args+=("$1") ;;
  esac
  shift
done
rm -rf "$dest" && mkdir -p "$dest" || { echo "gpu-kit: cannot make $dest" >&2; exit 1; }
tar -xzf "$here/payload.tar.gz" -C "$dest" || { echo "gpu-kit: unpacking $here/payload.tar.gz into $dest failed" >&2; exit 1; }
exec bash "$dest/gpu-check.sh" "${args[@]}"
