#!/usr/bin/env bash
# test/e2e/faults_store.sh — the env:// store (rank 0's TCP store) against a stranger on the
# network, with the checks of test/faults_lib.sh:
#   store_attack   a 2-rank env:// job, MASTER_ADDR=127.0.0.1, MT_STORE_SECRET set: while rank 0
#                  waits for rank 1, test/store_attack.py sends a forged hello claiming rank 1, a
#                  hello signed with a wrong secret, an unsigned hello with a wrong WORLD_SIZE,
#                  300 bytes of garbage and a hello header followed by 8 MiB, then holds 10 idle
#                  connections; a real rank with a wrong secret is refused, naming the secret; then
#                  the real rank 1 joins (while the idle ones are still open) and the job finishes
#                  with the serial run's losses (1e-4 relative, as dp_equivalence.sh). The store
#                  listens on 127.0.0.1 alone (/proc/net/tcp), every drop is logged with the
#                  peer's address, and none ended the job.
#   store_impostor a "store" on MASTER_PORT without the job's secret answers rank 1's hello with a
#                  host table: rank 1 refuses it (rank 0 must sign the rank's own nonce).
#   store_secret_rules  MT_STORE_SECRET of 8 characters, and MT_STORE_SECRET_FILE readable by
#                  others, are refused naming the variable / the fix.
# Tiny runs (2 layers, hidden 64, --threads 1): about 15 s on 2 cores.
source test/e2e_lib.sh
source test/faults_lib.sh
need_data
command -v python3 >/dev/null || { echo "SKIP: python3 (the attacker side) is missing"; exit 77; }
cp "$MTRAIN" "$TMP/mtrain" && MTRAIN="$TMP/mtrain"
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT MT_BOOTSTRAP MT_STORE_PORT MT_STORE_BIND \
  MT_STORE_SECRET_FILE
for v in $(env | grep -oE '^PMIX_[A-Z0-9_]+' | grep -v '^PMIX_MCA_'); do unset "$v"; done
export OMP_NUM_THREADS=1
ARGS=(--config configs/gpt-tiny.yaml --num-layers 2 --hidden-size 64 --seq-length 64 --micro-batch-size 2
      --global-batch-size 8 --threads 1 --set logging.interval=1 --set logging.eval_interval=0)
BASE=(--train-iters 4)
serial ref "${ARGS[@]}"
free_port() {
  local p i
  for i in $(seq 50); do
    p=$((20000 + RANDOM % 40000))
    grep -qi "$(printf ':%04X ' "$p")" /proc/net/tcp /proc/net/tcp6 2>/dev/null || { echo "$p"; return; }
  done
  echo 29517
}

# ---- store_attack ----
export MT_STORE_SECRET="faults-store-test-secret-0123456789"
port=$(free_port)
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2
fault_begin store_attack
RANK=0 fault_start "$MTRAIN" "${ARGS[@]}" "${BASE[@]}" --metrics "$TMP/attack.jsonl" --set parallel.timeout_s=40
python3 test/store_attack.py "$port" 30 >"$TMP/attack.out" 2>&1 &
attacker=$!
for i in $(seq 100); do grep -q "idle connections open" "$TMP/attack.out" && break; sleep 0.1; done
grep -q "idle connections open" "$TMP/attack.out" || { cat "$TMP/attack.out"; tail "$TMP/$CASE.log"; fail "attacker did not get through its attempts"; }
# the listening socket: 127.0.0.1 (0100007F) alone, never 0.0.0.0 or ::
hexport=$(printf '%04X' "$port")
listen_lines=$(awk -v p=":$hexport" '$2 ~ p"$" && $4 == "0A" {print $2}' /proc/net/tcp /proc/net/tcp6)
[ "$listen_lines" = "0100007F:$hexport" ] || fail "store_attack: the store listens on '$listen_lines', expected 127.0.0.1 alone"
# a real rank with the wrong secret: refused, told why
MT_STORE_SECRET="another-secret-of-enough-length" RANK=1 timeout 30 "$MTRAIN" "${ARGS[@]}" "${BASE[@]}" \
  --set parallel.timeout_s=20 >"$TMP/wrong_rank.log" 2>&1 && fail "store_attack: a rank with a wrong secret joined"
grep -q "not signed with rank 0's job secret (MT_STORE_SECRET)" "$TMP/wrong_rank.log" ||
  { cat "$TMP/wrong_rank.log"; fail "store_attack: the wrong-secret rank was not told why"; }
RANK=1 timeout 60 "$MTRAIN" "${ARGS[@]}" "${BASE[@]}" --set parallel.timeout_s=40 >"$TMP/rank1.log" 2>&1 ||
  { cat "$TMP/rank1.log"; fail "store_attack: rank 1 failed"; }
cp "$TMP/attack.out" "$TMP/attack.out.at_join" # the idle connections were open all along: no "done" yet
fault_wait 60
kill $attacker 2>/dev/null; wait $attacker 2>/dev/null
cat "$TMP/attack.out"
dropped_all() { # each attempt and the wrong-secret rank logged; the idle ones were still open when rank 1 joined
  local n; n=$(grep -c "dropped a connection from 127.0.0.1" "$TMP/$CASE.log")
  [ "$n" -ge 6 ] || { grep "dropped" "$TMP/$CASE.log"; echo "only $n drops logged (5 attempts, a wrong-secret rank)"; return 1; }
  grep -q "claiming rank 1) is not signed" "$TMP/$CASE.log" && grep -q "not an mtrain hello" "$TMP/$CASE.log" &&
    ! grep -q "^done" "$TMP/attack.out.at_join"
}
fault_end 0 "" dropped_all
compare "$TMP/ref.jsonl" "$TMP/attack.jsonl" "store_attack: 2-rank job after the attacks" 4 1e-4 1e-4
unset MASTER_ADDR MASTER_PORT WORLD_SIZE

# ---- store_impostor: a store on MASTER_PORT that does not hold the job's secret; rank 1 must
# refuse its host table (the store proves itself over the rank's nonce) ----
port=$(free_port)
python3 test/store_attack.py --impostor "$port" >"$TMP/impostor.out" 2>&1 &
impostor_pid=$!
for i in $(seq 100); do grep -q "impostor listening" "$TMP/impostor.out" && break; sleep 0.1; done
fault_begin store_impostor
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port fault_run timeout 30 "$MTRAIN" bootstrap-check --timeout 20
wait $impostor_pid 2>/dev/null
fault_end nonzero "did not prove that it holds this job's secret (MT_STORE_SECRET): it is not this job's rank 0"

# ---- store_secret_rules ----
fault_begin store_secret_rules
MT_STORE_SECRET=short RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) \
  fault_run "$MTRAIN" bootstrap-check
fault_end nonzero "MT_STORE_SECRET has 5 characters: expected 16"
printf 'a-secret-file-of-enough-length\n' >"$TMP/secret"
chmod 644 "$TMP/secret"
fault_begin store_secret_file_mode
env -u MT_STORE_SECRET MT_STORE_SECRET_FILE="$TMP/secret" RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
  MASTER_PORT=$(free_port) MT_E2E_MARK="$TMP/mode" "$MTRAIN" bootstrap-check >"$TMP/mode.log" 2>&1 && fail "mode 644 accepted"
grep -q "mode 644 lets others read it: chmod 600" "$TMP/mode.log" || { cat "$TMP/mode.log"; fail "mode 644: no clear message"; }
echo "ok  store_secret_file_mode: refused, 'chmod 600'"
echo "PASS"
