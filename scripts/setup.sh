#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a working kforge: installs the Debian packages
# (idempotent), configures and builds, then runs the most complete job there is so far:
# `kforge doctor` and a check of the smoke suite (on the GPU when there is one).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo}
cmake --build "$BUILD_DIR" -j"$(nproc)"
"$BUILD_DIR"/kforge doctor
if "$BUILD_DIR"/kforge doctor --json | grep -q '"libtorch_cuda_available": true'; then
  "$BUILD_DIR"/kforge tasks check smoke --device cuda
else
  echo
  echo "kforge: no usable GPU here (see 'GPU' above): checking the smoke suite on the CPU instead."
  echo "        GPU work (verification, timing, evolution) needs an NVIDIA GPU and a CUDA LibTorch."
  "$BUILD_DIR"/kforge tasks check smoke --device cpu
fi
echo
echo "kforge: a candidate from the corpus, checked and compiled with NVRTC (no GPU needed):"
"$BUILD_DIR"/kforge compile --answer tests/candidates/valid/softmax_rows.md --task smoke/softmax
