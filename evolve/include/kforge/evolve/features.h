// What a compiled candidate is like, measured by kforge itself from its resource report and PTX:
// the axes of the loop's MAP-Elites cells (docs/evolve.md, "Cells").
#pragma once

#include <string>

#include "kforge/compile/candidate.h"

namespace kforge::evolve {

struct Features {
  int registers_band = 0;  // most registers of a kernel: <=32, <=64, <=128, more
  int shared_band =
      0;  // most shared memory of a launch (static + dynamic): none, <=16 KiB, <=48 KiB, more
  bool tensor_cores = false;  // mma / wgmma instructions in the PTX
  int load_width = 1;      // widest vector global load: 1, 2 or 4 elements (ld.global[.nc].v2/.v4)
  int occupancy_band = 0;  // resident warps per SM the registers and block allow, in quarters of 64
};

// From an ok report (its kernels' resources, its timed configuration's launches, its PTX).
Features features_of(const compile::CandidateReport& report);

// The cell's name, e.g. "r1.s0.tc0.v4.o3": equal names, same cell.
std::string cell_of(const Features& f);

}  // namespace kforge::evolve
