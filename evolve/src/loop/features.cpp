#include "kforge/evolve/features.h"

#include <algorithm>

namespace kforge::evolve {
namespace {

int band(int64_t value, std::initializer_list<int64_t> bounds) {
  int b = 0;
  for (int64_t bound : bounds) {
    if (value <= bound) return b;
    ++b;
  }
  return b;
}

}  // namespace

Features features_of(const compile::CandidateReport& r) {
  Features f;
  int registers = 0;
  int64_t shared = 0, threads = 1;
  for (const auto& k : r.kernels) registers = std::max(registers, k.resources.registers);
  if (!r.configurations.empty())
    for (const auto& l : r.configurations.front().second.launches) {
      int static_shared = 0;
      for (const auto& k : r.kernels)
        if (k.name == l.kernel) static_shared = k.resources.static_shared_bytes;
      shared = std::max(shared, l.shared_bytes + static_shared);
      threads = std::max(threads, l.block[0] * l.block[1] * l.block[2]);
    }
  f.registers_band = band(registers, {32, 64, 128});
  f.shared_band = shared == 0 ? 0 : 1 + band(shared, {16 << 10, 48 << 10});
  const std::string& ptx = r.module.ptx;
  f.tensor_cores = ptx.find("mma.sync") != std::string::npos ||
                   ptx.find("wgmma") != std::string::npos ||
                   ptx.find("\tmma.") != std::string::npos;
  for (const char* v4 : {"ld.global.v4", "ld.global.nc.v4"})
    if (ptx.find(v4) != std::string::npos) f.load_width = 4;
  if (f.load_width == 1)
    for (const char* v2 : {"ld.global.v2", "ld.global.nc.v2"})
      if (ptx.find(v2) != std::string::npos) f.load_width = 2;
  // Resident warps per SM: 64 at most, 65536 registers, 32 blocks (sm_80 and later).
  int64_t warps_per_block = (threads + 31) / 32;
  int64_t by_registers =
      registers > 0 ? 65536 / (std::max(registers, 1) * 32 * warps_per_block) : 32;
  int64_t blocks =
      std::min<int64_t>({by_registers, 32, 64 / std::max<int64_t>(warps_per_block, 1)});
  int64_t warps = std::min<int64_t>(64, blocks * warps_per_block);
  f.occupancy_band = band(warps, {16, 32, 48});
  return f;
}

std::string cell_of(const Features& f) {
  return "r" + std::to_string(f.registers_band) + ".s" + std::to_string(f.shared_band) + ".tc" +
         std::to_string(f.tensor_cores ? 1 : 0) + ".v" + std::to_string(f.load_width) + ".o" +
         std::to_string(f.occupancy_band);
}

}  // namespace kforge::evolve
