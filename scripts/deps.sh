#!/usr/bin/env bash
# Installs kforge's Debian build dependencies. Idempotent: installs only what is missing.
set -euo pipefail
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev                      # LibTorch 1.13 (CPU) for references
  nlohmann-json3-dev libcli11-dev libtomlplusplus-dev libfmt-dev
  libsqlite3-dev sqlite3 libcurl4-openssl-dev libcpp-httplib-dev libxxhash-dev
  zlib1g-dev                        # gzipped JSONL for `kforge archive import`
  libgtest-dev libgmock-dev
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kforge: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "kforge: all Debian dependencies present"
fi
if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "kforge: the CUDA Toolkit (NVRTC and headers) is not installed; install CUDA 12.x/13.x from NVIDIA" >&2
  exit 1
fi
