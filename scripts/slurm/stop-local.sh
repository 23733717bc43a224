#!/usr/bin/env bash
# scripts/slurm/stop-local.sh — stops the one-machine Slurm of start-local.sh and removes its
# folder. Only processes started from DIR/slurm.conf are stopped (found by their pid files and
# by `-f DIR/slurm.conf` on their command line), plus the slurmstepd children of that slurmd:
# SIGTERM, then SIGKILL after 5 s.
#   usage: scripts/slurm/stop-local.sh [DIR]      (DIR default: $MT_SLURM_DIR or /tmp/mtrain-slurm)
set -uo pipefail
DIR="${1:-${MT_SLURM_DIR:-/tmp/mtrain-slurm}}"
CONF="$DIR/slurm.conf"

pids=()
for f in "$DIR/slurmctld.pid" "$DIR/slurmd.pid"; do
  [ -f "$f" ] && p="$(cat "$f" 2>/dev/null)" && [ -n "$p" ] && [ -d "/proc/$p" ] && pids+=("$p")
done
# daemons of this folder whose pid file is gone: their command line names DIR/slurm.conf
for p in $(pgrep -f -- "-f $CONF" 2>/dev/null); do
  case "$(cat "/proc/$p/comm" 2>/dev/null)" in slurmctld|slurmd) pids+=("$p");; esac
done
# slurmstepd processes that belong to these daemons (their parent is one of them)
for d in "${pids[@]:-}"; do
  [ -n "$d" ] || continue
  for p in $(pgrep -P "$d" 2>/dev/null); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = slurmstepd ] && pids+=("$p")
  done
done
pids=($(printf '%s\n' "${pids[@]:-}" | grep -E '^[0-9]+$' | sort -un))
if [ ${#pids[@]} -gt 0 ]; then
  kill -TERM "${pids[@]}" 2>/dev/null
  for _ in $(seq 1 50); do
    alive=()
    for p in "${pids[@]}"; do [ -d "/proc/$p" ] && alive+=("$p"); done
    [ ${#alive[@]} -eq 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do [ -d "/proc/$p" ] && kill -KILL "$p" 2>/dev/null; done
  echo "stop-local.sh: stopped ${#pids[@]} Slurm process(es) of $DIR"
fi
rm -rf "$DIR"
