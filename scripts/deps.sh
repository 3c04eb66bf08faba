#!/usr/bin/env bash
# Installs kforge's Debian build dependencies. Idempotent: installs only what is missing, where
# "present" means the compiler finds the header (or PATH the tool), installed by dpkg or not, so a
# machine that provides them some other way (CPATH, a CUDA LibTorch from PyTorch) needs no apt.
set -euo pipefail
cd "$(dirname "$0")/.."
has_header() { echo "#include <$1>" | ${CXX:-c++} -std=c++20 -E -x c++ - > /dev/null 2>&1; }
has_tool() { command -v "$1" > /dev/null; }
# A Python module kforge's helpers import, in python3 on PATH or Debian's python3.
has_python_module() {
  local py
  for py in python3 /usr/bin/python3; do command -v "$py" > /dev/null && "$py" -c "import $1" > /dev/null 2>&1 && return 0; done
  return 1
}
# package, then how to see it: "tool NAME", "header PATH" or "python MODULE"
NEEDS=(
  "build-essential tool c++" "cmake tool cmake" "ninja-build tool ninja"
  "nlohmann-json3-dev header nlohmann/json.hpp" "libcli11-dev header CLI/CLI.hpp"
  "libtomlplusplus-dev header toml++/toml.h" "libfmt-dev header fmt/format.h"
  "libsqlite3-dev header sqlite3.h" "libcurl4-openssl-dev header curl/curl.h"
  "libcpp-httplib-dev header httplib.h" "libxxhash-dev header xxhash.h" "zlib1g-dev header zlib.h"
  "libgtest-dev header gtest/gtest.h" "libgmock-dev header gmock/gmock.h"
  # The formatter CI checks with (scripts/check-format.sh): Debian 12's, pinned by its version.
  "clang-format-14 tool clang-format-14"
  # PyTorch for `kforge tasks import-kernelbench` (KernelBench problems are Python) and its tests.
  "python3-torch python torch"
)
missing=()
for need in "${NEEDS[@]}"; do
  read -r package kind what <<< "$need"
  case $kind in
    tool) has_tool "$what" || missing+=("$package") ;;
    python) has_python_module "$what" || missing+=("$package") ;;
    *) has_header "$what" || missing+=("$package") ;;
  esac
done
# LibTorch: Debian's (CPU) unless a CUDA build is found (scripts/find-libtorch.sh), which setup.sh prefers.
if ! scripts/find-libtorch.sh > /dev/null && ! has_header torch/script.h; then missing+=(libtorch-dev); fi
if ((${#missing[@]})); then
  echo "kforge: installing ${missing[*]}"
  if ! command -v apt-get > /dev/null; then
    echo "kforge: no apt-get here; install these (Debian package names) some other way: ${missing[*]}" >&2
    exit 1
  fi
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "kforge: all build dependencies present"
fi
if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "kforge: the CUDA Toolkit (NVRTC and headers) is not installed; install CUDA 12.x/13.x from NVIDIA" >&2
  exit 1
fi
