#!/usr/bin/env bash
# scripts/slurm/start-local.sh — starts a one-machine Slurm cluster (slurmctld + slurmd as root,
# no munge, no systemd, no cgroups) for the tests of `srun --mpi=pmix`. Everything lives in one
# folder: slurm.conf, state, spool, pid and log files.
#   usage: scripts/slurm/start-local.sh [DIR]     (DIR default: $MT_SLURM_DIR or /tmp/mtrain-slurm)
#   then:  export SLURM_CONF=DIR/slurm.conf; srun --mpi=pmix -n 4 ./mtrain ...
#   stop:  scripts/slurm/stop-local.sh [DIR]
# Idempotent: a healthy cluster already running from DIR is reused; a broken one (a crash, a
# node stuck in COMPLETING after a failed step) is stopped and started afresh. The daemons are
# started with `-f DIR/slurm.conf` and MT_SLURM_LOCAL_DIR=DIR in their environment, which
# slurmstepd (its parent is pid 1 once it daemonises) inherits from slurmd: that is how
# stop-local.sh recognises them all; nothing else is touched. TmpFS=DIR/tmp puts the PMIx
# plugin's spmix_appdir_* folders (else left in /tmp after a killed srun) inside DIR too. Needs root (SlurmUser=root) and the Debian packages slurmctld slurmd slurm-client,
# plus libpmix-dev (Slurm's PMIx plugin dlopens the unversioned libpmix.so that only
# libpmix-dev ships; without it srun hangs and the node sticks in COMPLETING).
set -euo pipefail
DIR="${1:-${MT_SLURM_DIR:-/tmp/mtrain-slurm}}"
HERE="$(cd "$(dirname "$0")" && pwd)"
HOST="$(hostname)"
CPUS="${MT_SLURM_CPUS:-8}" # more than the machine has, so -n 4..8 fit (SlurmdParameters=config_overrides)
export SLURM_CONF="$DIR/slurm.conf"

die() { echo "start-local.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (the local cluster runs SlurmUser=root)"
for c in slurmctld slurmd sinfo srun scontrol; do
  command -v "$c" >/dev/null || die "$c not found: run scripts/install-deps.sh (slurmctld slurmd slurm-client)"
done

node_state() { timeout 5 sinfo -h -n "$HOST" -o %T 2>/dev/null | head -n 1; }

# reuse a healthy cluster from this folder
if [ -f "$SLURM_CONF" ] && [ "$(node_state)" = idle ]; then
  echo "start-local.sh: Slurm already running from $DIR (node $HOST idle)"
  echo "export SLURM_CONF=$SLURM_CONF"
  exit 0
fi
# anything left from an earlier run (crash, failed step): stop it first
"$HERE/stop-local.sh" "$DIR" >/dev/null 2>&1 || true

mkdir -p "$DIR/state" "$DIR/spool" "$DIR/tmp"
cat >"$SLURM_CONF" <<CONF
# one-machine Slurm for mtrain's tests (scripts/slurm/start-local.sh)
ClusterName=mtrain-local
SlurmctldHost=$HOST(127.0.0.1)
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=pmix
ReturnToService=2
SlurmctldPort=${MT_SLURMCTLD_PORT:-6817}
SlurmdPort=${MT_SLURMD_PORT:-6818}
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
TmpFS=$DIR/tmp
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=local Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF

t0=$(date +%s.%N)
export MT_SLURM_LOCAL_DIR="$DIR" # the daemons and every slurmstepd carry it: see stop-local.sh
slurmctld -c -i -f "$SLURM_CONF" || die "slurmctld failed to start; see $DIR/slurmctld.log"
slurmd -f "$SLURM_CONF" || die "slurmd failed to start; see $DIR/slurmd.log"
state=""
for _ in $(seq 1 200); do # up to 20 s
  state="$(node_state)"
  [ "$state" = idle ] && break
  case "$state" in down*|drain*|unknown*) scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true;; esac
  sleep 0.1
done
if [ "$state" != idle ]; then
  echo "start-local.sh: node $HOST is '${state:-not answering}' after 20 s; last log lines:" >&2
  tail -n 5 "$DIR/slurmctld.log" "$DIR/slurmd.log" >&2 || true
  "$HERE/stop-local.sh" "$DIR" >/dev/null 2>&1 || true
  exit 1
fi
echo "start-local.sh: Slurm up from $DIR, node $HOST idle after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}') s"
echo "export SLURM_CONF=$SLURM_CONF"
