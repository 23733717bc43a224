# test/multinode/slurm.sh — a sourced library: a Slurm cluster across the namespace nodes of
# nodes.sh (call mn_up first). slurmctld and a slurmd run inside node 0, a slurmd inside every
# other node (NodeName=mtnodeI NodeAddr=its address), all with auth/none like
# scripts/slurm/start-local.sh's one-machine cluster. They live in the nodes' PID namespaces, so
# mn_down ends them with everything else. Each node gets its own Slurm TmpFS (a folder bound
# over the shared one inside the node's mount namespace), as each machine has its own disk: the
# PMIx plugin's per-step folders must not collide.
#   mn_slurm_up DIR     writes DIR/slurm.conf, starts the daemons, waits until every node is idle
#                       (exports SLURM_CONF), or fails saying why
mn_slurm_up() {
  local d=$1 i n=${#MN_PIDS[@]} names="" s=""
  for c in slurmctld slurmd sinfo srun; do
    command -v $c >/dev/null || { echo "FAIL: $c missing: scripts/install-deps.sh installs slurmctld slurmd slurm-client"; exit 1; }
  done
  mkdir -p "$d/state" "$d/tmp"
  for ((i = 0; i < n; i++)); do names="$names${names:+,}mtnode$i"; done
  {
    echo "ClusterName=mtrain-nodes"
    echo "SlurmctldHost=mtnode0($(mn_addr 0))"
    printf '%s\n' AuthType=auth/none CredType=cred/none SlurmUser=root SlurmdUser=root \
      ProctrackType=proctrack/linuxproc TaskPlugin=task/none JobAcctGatherType=jobacct_gather/none \
      AccountingStorageType=accounting_storage/none SelectType=select/cons_tres SelectTypeParameters=CR_CPU \
      SlurmdParameters=config_overrides MpiDefault=pmix ReturnToService=2
    echo "StateSaveLocation=$d/state"
    echo "SlurmdSpoolDir=$d/spool-%n"
    echo "TmpFS=$d/tmp"
    echo "SlurmctldPidFile=$d/slurmctld.pid"
    echo "SlurmdPidFile=$d/slurmd-%n.pid"
    echo "SlurmctldLogFile=$d/slurmctld.log"
    echo "SlurmdLogFile=$d/slurmd-%n.log"
    for ((i = 0; i < n; i++)); do echo "NodeName=mtnode$i NodeAddr=$(mn_addr $i) CPUs=4 State=UNKNOWN"; done
    echo "PartitionName=nodes Nodes=$names Default=YES MaxTime=INFINITE State=UP"
  } >"$d/slurm.conf"
  export SLURM_CONF="$d/slurm.conf"
  for ((i = 0; i < n; i++)); do
    mkdir -p "$d/tmp$i"
    mn_exec $i mount --bind "$d/tmp$i" "$d/tmp"
  done
  mn_exec 0 slurmctld -c -i -f "$SLURM_CONF" || { cat "$d/slurmctld.log"; echo "FAIL: slurmctld did not start"; exit 1; }
  for ((i = 0; i < n; i++)); do
    mn_exec $i slurmd -N mtnode$i -f "$SLURM_CONF" || { echo "FAIL: slurmd of mtnode$i did not start"; exit 1; }
  done
  for _ in $(seq 1 150); do
    s=$(mn_exec 0 sinfo -h -o %T 2>/dev/null | sort -u | tr '\n' ' ')
    [ "$s" = "idle " ] && return 0
    sleep 0.2
  done
  cat "$d/slurmctld.log"; echo "FAIL: the nodes did not become idle (sinfo: $s)"; exit 1
}
