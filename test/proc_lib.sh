# test/proc_lib.sh — process helpers of the tests that start launchers (sourced, not run; e2e_lib.sh
# sources it, and so does bootstrap_launchers.sh, which keeps its own temporary folder).
# wait_exit PID SECONDS: until PID is gone; sets rc to its status (124 on timeout)
wait_exit() {
  local i
  for i in $(seq 1 $(($2 * 20))); do
    if ! kill -0 "$1" 2>/dev/null; then wait "$1"; rc=$?; return 0; fi
    sleep 0.05
  done
  rc=124
  return 1
}
# wait_lines FILE N SECONDS: until FILE has N lines ending in " ok" (ranks reporting)
wait_lines() {
  local i
  for i in $(seq 1 $(($3 * 20))); do
    [ "$(grep -c ' ok$' "$1" 2>/dev/null)" -ge "$2" ] && return 0
    sleep 0.05
  done
  return 1
}
