#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a working kforge: installs the Debian packages
# (idempotent), configures and builds, then runs the most complete job there is so far:
# `kforge doctor`, a check of the smoke suite (on the GPU when there is one), a candidate compiled,
# and, on a GPU, the smoke suite's seed kernels tuned, verified, timed and stored (kforge corpus),
# their results table, and a cheating candidate caught.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo}
cmake --build "$BUILD_DIR" -j"$(nproc)"
"$BUILD_DIR"/kforge doctor
gpu=0
"$BUILD_DIR"/kforge doctor --json | grep -q '"libtorch_cuda_available": true' && gpu=1
if [ "$gpu" = 1 ]; then
  "$BUILD_DIR"/kforge tasks check smoke --device cuda
else
  echo
  echo "kforge: no usable GPU here (see 'GPU' above): checking the smoke suite on the CPU instead."
  echo "        GPU work (verification, timing, evolution) needs an NVIDIA GPU and a CUDA LibTorch."
  "$BUILD_DIR"/kforge tasks check smoke --device cpu
fi
echo
echo "kforge: a candidate from the corpus, checked and compiled with NVRTC (no GPU needed):"
"$BUILD_DIR"/kforge compile --answer tests/gpu/honest/softmax_rows.md --task smoke/softmax
echo
if [ "$gpu" = 1 ]; then
  echo "kforge: the smoke suite's seed kernels tuned, verified and timed on the GPU, stored, and their table:"
  "$BUILD_DIR"/kforge corpus tasks/smoke/seeds --expect correct --kind seed --tune 4
  "$BUILD_DIR"/kforge archive results smoke --kind seed
  echo "kforge: a candidate that writes past its output:"
  "$BUILD_DIR"/kforge verify --answer tests/gpu/exploits/oob_write.md --task smoke/relu --no-store || true
else
  echo "kforge: 'kforge verify' and 'kforge corpus' (correctness and timing on the GPU) need an NVIDIA GPU;"
  echo "        none can be used here."
fi
