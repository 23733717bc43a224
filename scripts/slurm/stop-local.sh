#!/usr/bin/env bash
# scripts/slurm/stop-local.sh — stops the one-machine Slurm of start-local.sh and removes its
# folder. First the jobs still running on it are cancelled (scancel, up to 3 s, so slurmstepd
# stops its tasks itself), then every process of this cluster is stopped by pid: those whose
# environment holds MT_SLURM_LOCAL_DIR=DIR (start-local.sh sets it for slurmctld and slurmd;
# slurmstepd inherits it from slurmd even though its parent is pid 1 once it daemonises), and
# those in DIR's pid files; nothing is looked up by name or command line. Only processes named
# slurmctld, slurmscriptd, slurmd or slurmstepd among those are touched: SIGTERM, SIGKILL after 5 s.
# Removing DIR removes the PMIx plugin's spmix_appdir_* folders too (TmpFS=DIR/tmp).
#   usage: scripts/slurm/stop-local.sh [DIR]      (DIR default: $MT_SLURM_DIR or /tmp/mtrain-slurm)
set -uo pipefail
DIR="${1:-${MT_SLURM_DIR:-/tmp/mtrain-slurm}}"
CONF="$DIR/slurm.conf"

ours() { case "$(cat "/proc/$1/comm" 2>/dev/null)" in slurmctld|slurmscriptd|slurmd|slurmstepd) return 0;; esac; return 1; }
find_pids() {
  local p f
  for f in "$DIR/slurmctld.pid" "$DIR/slurmd.pid"; do
    [ -f "$f" ] && p="$(cat "$f" 2>/dev/null)" && [[ "$p" =~ ^[0-9]+$ ]] && ours "$p" && echo "$p"
  done
  # everything started from this folder, slurmstepd included: by the marker in its environment
  for p in $(grep -lzx -- "MT_SLURM_LOCAL_DIR=$DIR" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    ours "$p" && echo "$p"
  done
}

# jobs still running (a killed srun leaves its step behind): let Slurm end them first
if [ -f "$CONF" ] && command -v squeue >/dev/null; then
  jobs=$(SLURM_CONF="$CONF" timeout 3 squeue -h -o %i 2>/dev/null | grep -E '^[0-9]+' || true)
  if [ -n "$jobs" ]; then
    SLURM_CONF="$CONF" timeout 3 scancel $jobs >/dev/null 2>&1
    for _ in $(seq 1 30); do
      [ -z "$(for p in $(find_pids); do [ "$(cat /proc/$p/comm 2>/dev/null)" = slurmstepd ] && echo "$p"; done)" ] && break
      sleep 0.1
    done
  fi
fi
pids=($(find_pids | sort -un))
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
