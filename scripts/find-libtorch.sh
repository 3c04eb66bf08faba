#!/usr/bin/env bash
# Prints the CMake prefix of a CUDA build of LibTorch, the one kforge needs to judge on a GPU, and
# exits 0; exits 1, printing nothing, when there is none. Looked for, in order:
#   $Torch_DIR   a folder holding TorchConfig.cmake (its prefix is three folders up)
#   $LIBTORCH    an unpacked LibTorch download (holding share/cmake/Torch)
#   the LibTorch inside an installed PyTorch: python3 -c 'import torch; torch.utils.cmake_prefix_path'
# A LibTorch counts as a CUDA build when its folder holds libtorch_cuda.so (or PyTorch says
# torch.version.cuda).
set -uo pipefail
has_cuda_lib() { ls "$1"/lib/libtorch_cuda.so* > /dev/null 2>&1 || ls "$1"/../../lib/libtorch_cuda.so* > /dev/null 2>&1; }
if [[ -n "${Torch_DIR:-}" && -f "$Torch_DIR/TorchConfig.cmake" ]]; then
  prefix=$(cd "$Torch_DIR/../../.." && pwd)
  has_cuda_lib "$prefix" && { echo "$prefix"; exit 0; }
fi
if [[ -n "${LIBTORCH:-}" && -f "$LIBTORCH/share/cmake/Torch/TorchConfig.cmake" ]]; then
  has_cuda_lib "$LIBTORCH" && { echo "$(cd "$LIBTORCH" && pwd)/share/cmake"; exit 0; }
fi
PY=${PYTHON:-python3}
if command -v "$PY" > /dev/null; then
  prefix=$("$PY" -c 'import torch, sys
sys.exit(1) if torch.version.cuda is None else print(torch.utils.cmake_prefix_path)' 2>/dev/null) && [[ -n "$prefix" ]] &&
    { echo "$prefix"; exit 0; }
fi
exit 1
