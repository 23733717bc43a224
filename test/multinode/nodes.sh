# test/multinode/nodes.sh — a sourced shell library that makes N "nodes" on one machine for the
# multi-node tests: each node is a set of fresh namespaces (network, UTS = its own hostname, IPC,
# mount with a private tmpfs on /dev/shm, its own /proc and an /etc/hosts naming every node, PID)
# held by one holder process, and
# the nodes' eth0 are veth pairs into a bridge that lives in a "switch" network namespace of its
# own. Nothing is created in the machine's own network namespace: its interfaces, addresses and
# routes are never touched; the nodes' addresses (MN_NET.1, .2, ...) exist only inside the nodes.
#   mn_up N           makes nodes 0..N-1 (hostnames mtnode0..), or exits 77 saying why it cannot
#   mn_node_up I      makes node I again after mn_kill_node I (a replaced machine)
#   mn_addr I         node I's address
#   mn_exec I cmd...  runs cmd inside node I (all its namespaces; cwd kept)
#   mn_kill_node I    SIGKILL to every process of node I (its PID namespace dies with its holder)
#   mn_link I up|down node I's link to the bridge up or down
#   mn_launch_all ... mtrain launch once per node (see below)
#   mn_mpirun_agent F OpenMPI's remote-launch agent into the nodes (see below)
#   mn_check_shm_empty  fails the test when a node's /dev/shm keeps anything
#   mn_down           tears everything down (also run by the EXIT trap mn_up installs)
# Teardown on every exit path: each holder is PID 1 of its node's PID namespace, so when it dies
# the kernel kills every process of that node, and with them go the node's namespaces, its veth
# and (with the switch holder) the bridge. The holders die with the test's shell whatever ends it
# (an exit, a signal, SIGKILL): they carry a parent-death signal (setpriv --pdeathsig KILL on
# unshare, and unshare --kill-child on the holder).
MN_NET="${MN_NET:-10.213.0}"
MN_PIDS=()   # holder pid per node
MN_SWITCH="" # holder pid of the switch namespace
MN_DIR=""    # the nodes' /etc/hosts and the like

mn_skip() { echo "SKIP: $*"; exit 77; }

# mn_holder FLAGS...: starts a holder in fresh namespaces and sets MN_HOLDER to its pid (the
# holder is the forked child of unshare, PID 1 of its namespace when --pid is among FLAGS). Not
# called in a subshell: the shell that runs it is the parent whose death kills it.
MN_HOLDER=""
mn_holder() {
  setpriv --pdeathsig KILL unshare "$@" --fork --kill-child sleep infinity \
    </dev/null >/dev/null 2>&1 &
  local up=$! child="" k
  for k in $(seq 1 100); do
    child=$(cat /proc/$up/task/$up/children 2>/dev/null | awk '{print $1}')
    [ -n "$child" ] && [ "$(cat /proc/$child/comm 2>/dev/null)" = sleep ] && break
    child=""; sleep 0.02
  done
  MN_HOLDER="$child"
  [ -n "$child" ]
}

mn_up() {
  local n="$1" i pid
  [ "$(id -u)" = 0 ] || mn_skip "multi-node tests make network namespaces: they need root"
  for tool in ip unshare nsenter setpriv; do
    command -v "$tool" >/dev/null || mn_skip "multi-node tests need '$tool' (iproute2/util-linux)"
  done
  ldd "${MTRAIN:-./mtrain}" 2>/dev/null | grep -q libgloo ||
    mn_skip "this mtrain is built without Gloo, the engine between nodes (scripts/install-deps.sh installs libgloo-dev; rebuild)"
  trap 'mn_down; if declare -F cleanup >/dev/null; then cleanup; fi' EXIT # e2e_lib.sh's cleanup too
  trap 'exit 143' TERM INT HUP
  MN_DIR=$(mktemp -d /tmp/mtrain-nodes.XXXXXX)
  mn_holder --net || mn_skip "cannot make a network namespace here (unshare --net refused)"
  MN_SWITCH=$MN_HOLDER
  nsenter -t "$MN_SWITCH" -n ip link add br0 type bridge 2>/dev/null ||
    mn_skip "cannot make a bridge inside a network namespace (no bridge support in this kernel)"
  nsenter -t "$MN_SWITCH" -n ip link set br0 up
  nsenter -t "$MN_SWITCH" -n ip link set lo up
  mn_hosts "$n" >"$MN_DIR/hosts"
  for ((i = 0; i < n; i++)); do mn_node_up "$i"; done
}

# mn_node_up I: makes node I (again: a replacement for a node killed by mn_kill_node, same name
# and address); exits 77 saying why it cannot
mn_node_up() {
  local i=$1 pid
  mn_holder --net --uts --ipc --pid --mount --propagation private --mount-proc ||
    mn_skip "cannot make node namespaces here (unshare --net --uts --ipc --pid --mount refused)"
  pid=$MN_HOLDER
  MN_PIDS[$i]=$pid
  nsenter -t "$pid" -u hostname "mtnode$i"
  nsenter -t "$pid" -m mount -t tmpfs -o mode=1777,size=512m mtnode-shm /dev/shm ||
    mn_skip "cannot mount a tmpfs on /dev/shm inside a mount namespace"
  nsenter -t "$pid" -m mount --bind "$MN_DIR/hosts" /etc/hosts # every node's name resolves
  nsenter -t "$MN_SWITCH" -n ip link add "p$i" type veth peer name eth0 netns "$pid" ||
    mn_skip "cannot make veth pairs (no veth support in this kernel)"
  nsenter -t "$MN_SWITCH" -n ip link set "p$i" master br0 up
  nsenter -t "$pid" -n ip link set lo up
  nsenter -t "$pid" -n ip addr add "$(mn_addr "$i")/24" dev eth0
  nsenter -t "$pid" -n ip link set eth0 up
}

# /etc/hosts of the nodes: localhost and mtnode0..N-1
mn_hosts() {
  local i
  printf '127.0.0.1 localhost\n::1 localhost\n'
  for ((i = 0; i < $1; i++)); do echo "$(mn_addr "$i") mtnode$i"; done
}

mn_addr() { echo "$MN_NET.$(($1 + 1))"; }

# every namespace of the node, and the same working directory (the mount namespace is a copy of
# the machine's, so the repository is there; only /dev/shm and /proc are the node's own)
mn_exec() {
  local i="$1"; shift
  nsenter -t "${MN_PIDS[$i]}" -n -u -i -m -p --wd="$PWD" -- "$@"
}

# mn_link I up|down: node I's cable (its veth's switch end) plugged in or pulled out
mn_link() { nsenter -t "$MN_SWITCH" -n ip link set "p$1" "$2"; }

mn_kill_node() {
  local p=${MN_PIDS[$1]:-}
  [ -n "$p" ] || return 0
  kill -KILL "$p" 2>/dev/null
  MN_PIDS[$1]=""
  while [ -e "/proc/$p" ]; do sleep 0.02; done # gone with its namespaces (and its veth)
  local k
  for k in $(seq 1 100); do nsenter -t "$MN_SWITCH" -n ip link show "p$1" >/dev/null 2>&1 || break; sleep 0.02; done
}

# files in a node's private /dev/shm (what a test checks is empty after a run)
mn_shm_files() { nsenter -t "${MN_PIDS[$1]}" -m ls -A /dev/shm 2>/dev/null; }

# mn_check_shm_empty: every live node's /dev/shm is empty, else the test fails naming what is left
mn_check_shm_empty() {
  local i left
  for ((i = 0; i < ${#MN_PIDS[@]}; i++)); do
    [ -n "${MN_PIDS[$i]}" ] || continue
    left=$(mn_shm_files "$i")
    [ -z "$left" ] || { echo "FAIL: node $i's /dev/shm keeps: $left"; exit 1; }
  done
}

mn_down() {
  local p
  for p in "${MN_PIDS[@]}" "$MN_SWITCH"; do [ -n "$p" ] && kill -KILL "$p" 2>/dev/null; done
  for p in "${MN_PIDS[@]}" "$MN_SWITCH"; do
    [ -n "$p" ] && while [ -e "/proc/$p" ]; do sleep 0.02; done
  done
  MN_PIDS=(); MN_SWITCH=""
  [ -n "$MN_DIR" ] && rm -rf "$MN_DIR"
  MN_DIR=""
}

# mn_launch_all NAME PORT RANKS_PER_NODE ARGS...: `mtrain launch --nnodes N --node-rank R` once per
# node, all at once, with node 0's address as MASTER_ADDR; logs $TMP/NAME.nodeR.log, metrics in
# $TMP/NAME.jsonl (every node is given the path; only the logging rank, wherever it runs, opens it); returns non-zero when any node's launcher failed. (A bare `wait`
# would also wait for the holders: wait for these pids only.)
mn_launch_all() {
  local name=$1 port=$2 n=$3 i pids=() rc=0; shift 3
  for ((i = 0; i < ${#MN_PIDS[@]}; i++)); do
    mn_exec "$i" timeout 120 "$MTRAIN" launch -n "$n" --nnodes "${#MN_PIDS[@]}" --node-rank "$i" \
      --master-addr "$(mn_addr 0)" --master-port "$port" -- "$@" --metrics "$TMP/$name.jsonl" >"$TMP/$name.node$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || rc=1; done
  return $rc
}

# mn_mpirun_agent FILE: writes an OpenMPI remote-launch agent (mpirun --mca plm_rsh_agent FILE,
# run by mpirun inside node 0) that runs "FILE HOST COMMAND..." inside node HOST (mtnodeI): the
# node's network, UTS, IPC and mount namespaces, and a fresh PID namespace with its own /proc
# (a sibling node's PID namespace cannot be entered from node 0's; the fresh one is a child of
# node 0's, so it dies with node 0, and the node's ranks share it). Node 0 gets a second /proc,
# of the machine's PID namespace, at $MN_DIR/hostproc, through which the agent finds the holders.
mn_mpirun_agent() {
  local f=$1 hp="$MN_DIR/hostproc" i
  mkdir -p "$hp"
  nsenter -t "${MN_PIDS[0]}" -m mount -t proc proc "$hp" || { echo "FAIL: cannot mount a /proc for the agent"; exit 1; }
  {
    echo '#!/bin/bash'
    echo 'host=$1; shift'
    echo 'case $host in'
    for ((i = 0; i < ${#MN_PIDS[@]}; i++)); do echo "  mtnode$i) ns=$hp/${MN_PIDS[$i]}/ns;;"; done
    echo '  *) echo "mpirun agent: no node $host" >&2; exit 1;;'
    echo 'esac'
    echo "exec nsenter --net=\$ns/net --uts=\$ns/uts --ipc=\$ns/ipc --mount=\$ns/mnt --wd=\"$PWD\" -- \\"
    echo '  unshare --pid --fork --mount-proc --kill-child /bin/sh -c "$*"'
  } >"$f"
  chmod +x "$f"
}
