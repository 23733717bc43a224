#!/usr/bin/env bash
# test/fault_sweep.sh — the fault-injection sweep, on its own: signals to ranks and
# launchers under mtrain launch / env:// / mpirun / srun, a full disk, concurrent writers, files
# changed under a run, bad inputs, FIFOs where files are read, a hostile client of the env://
# store, HF imports that would compute another model. The cases live in
# test/e2e/faults_{data,inputs,launch,store,import}.sh (make test runs them; the kill -9 sweep
# during saves, 20 trials with checkpoint.keep=2, is part 2 of test/e2e/checkpoint_safety.sh);
# each asserts the exit status, a message naming the culprit, no process left,
# nothing new in /dev/shm or the case's TMPDIR, and no partial or mixed output under a final name
# (test/faults_lib.sh). Usage: test/fault_sweep.sh
cd "$(dirname "$0")/.." && exec ./test/run.sh faults_
