#!/usr/bin/env bash
# scripts/slurm/with-local.sh — runs one command with the one-machine Slurm of start-local.sh up
# and SLURM_CONF exported, then stops it. Holds an exclusive lock (/tmp/mtrain-slurm.lock) the
# whole time, so test runs that want Slurm at the same moment take turns instead of fighting
# over the node name and ports. Exit status: the command's (1 if Slurm did not start).
#   usage: scripts/slurm/with-local.sh srun --mpi=pmix -n 4 ./mtrain --config configs/gpt-tiny.yaml
#          scripts/slurm/with-local.sh bash -c 'srun ...; srun ...'
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DIR="${MT_SLURM_DIR:-/tmp/mtrain-slurm}"
exec 9>"${MT_SLURM_LOCK:-/tmp/mtrain-slurm.lock}"
flock -w "${MT_SLURM_LOCK_WAIT:-600}" 9 || { echo "with-local.sh: another run holds the Slurm lock" >&2; exit 1; }
"$HERE/start-local.sh" "$DIR" >&2 || exit 1
export SLURM_CONF="$DIR/slurm.conf"
"$@"
rc=$?
"$HERE/stop-local.sh" "$DIR" >&2
exit $rc
