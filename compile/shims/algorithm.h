// kforge shim for <algorithm> under NVRTC: std::min and std::max from libcu++.
#pragma once
#include <cuda/std/__algorithm/max.h>
#include <cuda/std/__algorithm/min.h>
namespace std {
using cuda::std::max;
using cuda::std::min;
}  // namespace std
