#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a working kforge: installs the Debian packages
# (idempotent), configures and builds, then runs the most complete job there is so far:
# `kforge doctor`, a check of the smoke suite (on the GPU when there is one), a candidate compiled,
# and, on a GPU, the smoke suite's seed kernels tuned, verified, timed and stored (kforge corpus),
# their results table, a cheating candidate caught, and the search loop (kforge evolve, offline)
# on the smoke suite with its report.
set -euo pipefail
cd "$(dirname "$0")/.."
# One line per phase with its time; a phase's own output goes to its log under $BUILD_DIR.
BUILD_DIR=${BUILD_DIR:-build}
mkdir -p "$BUILD_DIR"
phase_start=$SECONDS
phase_done() { echo "kforge: $1 ($((SECONDS - phase_start)) s)"; phase_start=$SECONDS; }
scripts/deps.sh
phase_done "dependencies ready"
torch_args=()
# With an NVIDIA GPU, kforge judges kernels and needs a CUDA LibTorch: find one, or say how to get it.
if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
  if prefix=$(scripts/find-libtorch.sh); then
    echo "kforge: a GPU is present; building against the CUDA LibTorch at $prefix"
    torch_args=(-DCMAKE_PREFIX_PATH="$prefix" -DTorch_DIR="$prefix/Torch")
  else
    cuda=$(nvidia-smi | sed -nE 's/.*CUDA Version: ([0-9]+)\.([0-9]+).*/\1\2/p' | head -1)
    cat >&2 <<MSG
kforge: this machine has an NVIDIA GPU, but no CUDA build of LibTorch was found, and kforge needs one
        to judge kernels on the GPU (Debian's libtorch-dev is CPU-only). Either:
          pip install torch --index-url https://download.pytorch.org/whl/cu${cuda:-130}
        (PyTorch for the driver's CUDA ${cuda:-13.0}; its LibTorch is found through python3), or unpack a
        LibTorch download and set LIBTORCH=/path/to/libtorch, or set Torch_DIR to the folder holding
        TorchConfig.cmake. Then run scripts/setup.sh again.
MSG
    exit 1
  fi
fi
# kforge and its helper processes only: the tests are built by scripts/test.sh.
run_logged() {
  local log=$1; shift
  "$@" > "$log" 2>&1 || { tail -40 "$log" >&2; echo "kforge: failed; the whole log: $log" >&2; exit 1; }
}
run_logged "$BUILD_DIR/configure.log" \
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} "${torch_args[@]}"
phase_done "configured ($BUILD_DIR/configure.log)"
run_logged "$BUILD_DIR/build.log" cmake --build "$BUILD_DIR" -j"$(nproc)" \
  --target kforge kforge-core kforge-runner kforge-nvrtc-worker
phase_done "built kforge ($BUILD_DIR/build.log)"
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
  "$BUILD_DIR"/kforge corpus tasks/smoke/seeds --expect correct --kind seed --tune-points 4
  "$BUILD_DIR"/kforge archive results smoke --kind seed
  echo "kforge: a candidate that writes past its output:"
  "$BUILD_DIR"/kforge verify --answer tests/gpu/exploits/oob_write.md --task smoke/relu --no-store || true
  echo
  echo "kforge: the search loop on the smoke suite (offline: the autotuner proposes), and its report:"
  "$BUILD_DIR"/kforge evolve smoke --llm none --generations 3 | tee "$BUILD_DIR/evolve.log"
  run=$(sed -nE 's/^run ([0-9]+):.*/\1/p' "$BUILD_DIR/evolve.log" | tail -1)
  [ -n "$run" ] && "$BUILD_DIR"/kforge report "$run"
else
  echo "kforge: 'kforge evolve', 'kforge verify' and 'kforge corpus' (correctness and timing on the GPU)"
  echo "        need an NVIDIA GPU; none can be used here, so the search loop does not run. What it"
  echo "        would do on the smoke suite:"
  "$BUILD_DIR"/kforge evolve smoke --llm none --dry-run
fi
phase_done "set-up done"
if [ "$gpu" = 0 ]; then
  cat <<MSG

What this machine can do without a GPU (README.md, docs/):
  $BUILD_DIR/kforge compile examples/relu.cu --plan examples/relu.json --task smoke/relu
  $BUILD_DIR/kforge tasks check level1                      # the references, on the CPU
  $BUILD_DIR/kforge archive import --trust docs/results/evolve-level1-level2-2026-12-03.jsonl.gz --db /tmp/r.db
  $BUILD_DIR/kforge serve --db /tmp/r.db                    # the web view of those results
  $BUILD_DIR/kforge export --out kernels --from docs/results/evolve-level1-level2-2026-12-03.jsonl.gz --harness 2
  $BUILD_DIR/kforge tasks import-kernelbench PROBLEM.py --suite kb --out tasks
  $BUILD_DIR/kforge evolve smoke --worker-command '...' --workers N   # judged on GPUs elsewhere (docs/scale.md)
  scripts/test.sh                                           # the tests (GPU tests skip, saying why)
MSG
fi
