#!/usr/bin/env bash
# Installs the Debian packages mtrain needs to build, run and test. Idempotent: when
# everything is present it only runs dpkg-query and returns in well under a second.
set -euo pipefail

# build: libyaml (recipes), OpenBLAS (CPU GEMMs), PMIx (bootstrap), Gloo + g++ (the network
#        communicator for CPU ranks on several nodes, a C++ library)
# data:  bible-kjv (public-domain corpus for `make run` and the tests), unicode-data (source
#        of the tokenizer's generated Unicode tables: scripts/gen-unicode-tables.sh)
# tests: slurm + munge, openmpi (launch tests), unicode-data (tokenizer tables), python3-numpy
#        (test/ref/hf_logprobs.py: the independent Hugging Face forward the export is checked against),
#        jq (the fault sweep checks that metrics files hold only whole JSON records), iproute2 (the
#        multi-node tests' namespaces: test/multinode/nodes.sh),
#        python3-sentencepiece (the upstream SentencePiece library and trainer: the reference
#        test/e2e/tokenizer_spm.sh compares mtrain's SentencePiece ids with)
PKGS=(libyaml-dev libopenblas-dev libpmix-dev pkg-config libgloo-dev g++ iproute2
      bible-kjv bible-kjv-text unicode-data
      openmpi-bin slurmctld slurmd slurm-client python3-numpy jq python3-sentencepiece)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
