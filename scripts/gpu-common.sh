# Sourced by the scripts/gpu-*.sh: the repository root as working folder, where logs go ($OUT: on
# the device the folder that comes back), the build folder, and build_kforge, which builds only
# kforge and its two helper processes when they are missing (a call that needs no tests).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build-gpu}
export CMAKE_POLICY_VERSION_MINIMUM=3.5  # LibTorch's bundled Find modules predate CMake 4
K="$BUILD_DIR/kforge"

build_kforge() {
  [ -x "$K" ] && return 0
  { cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFORGE_BUILD_TESTS=OFF &&
    cmake --build "$BUILD_DIR" -j"$(nproc)" --target kforge kforge-runner kforge-nvrtc-worker; } > "$OUT/build.log" 2>&1 ||
    { grep -E "error|Error" "$OUT/build.log" | head -30; return 1; }
  echo "built in ${SECONDS}s"
}
