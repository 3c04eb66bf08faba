# Sourced by the scripts/gpu-*.sh: the repository root as working folder, where logs go ($OUT: on
# the device the folder that comes back), the build folder, torch.compile's package cache, and
# build_kforge, which builds kforge, its two helper processes and any targets named.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build-gpu}
export CMAKE_POLICY_VERSION_MINIMUM=3.5  # LibTorch's bundled Find modules predate CMake 4
K="$BUILD_DIR/kforge"

# torch.compile's packages (verify/compiled_reference.h) where this machine keeps them; a cache that
# an earlier call packed (scripts/gpu-compiled.sh build) and that travelled in .gpu-in/ is unpacked.
export KFORGE_CACHE_DIR=${KFORGE_CACHE_DIR:-$PWD/.cache/kforge}
mkdir -p "$KFORGE_CACHE_DIR"
if [ -f .gpu-in/compiled-cache.tgz ] && [ ! -d "$KFORGE_CACHE_DIR/compiled" ]; then
  tar -C "$KFORGE_CACHE_DIR" -xzf .gpu-in/compiled-cache.tgz &&
    echo "torch.compile packages from .gpu-in: $(find "$KFORGE_CACHE_DIR/compiled" -name '*.pt2' | wc -l)"
fi

# pack_compiled_cache: this machine's torch.compile packages into $OUT/compiled-cache.tgz, for the
# next session's calls (put it in .gpu-in/ and carry it): a fresh machine builds ~80 packages in
# ~14 minutes otherwise. The device returns files of at most 16 MiB.
pack_compiled_cache() {
  [ -d "$KFORGE_CACHE_DIR/compiled" ] || return 0
  tar -C "$KFORGE_CACHE_DIR" -czf "$OUT/compiled-cache.tgz" compiled &&
    echo "compiled-cache.tgz: $(find "$KFORGE_CACHE_DIR/compiled" -name '*.pt2' | wc -l) package(s)," \
      "$(( $(stat -c %s "$OUT/compiled-cache.tgz") / 1048576 )) MiB (the device returns at most 16)"
}

# build_kforge [TARGET...]: kforge, its helper processes and the targets named (a no-op once built).
build_kforge() {
  local t0=$SECONDS
  { [ -f "$BUILD_DIR/build.ninja" ] || cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release; } > "$OUT/build.log" 2>&1 &&
    cmake --build "$BUILD_DIR" -j"$(nproc)" --target kforge kforge-core kforge-runner kforge-nvrtc-worker "$@" >> "$OUT/build.log" 2>&1 ||
    { grep -E "error|Error" "$OUT/build.log" | head -30; return 1; }
  echo "built in $((SECONDS - t0))s"
}
