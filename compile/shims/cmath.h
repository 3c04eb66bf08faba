// kforge shim for <cmath> / <math.h> under NVRTC: CUDA's math functions are built in; this adds
// the std:: names people write.
#pragma once
#include <cuda/std/cmath>
namespace std {
using cuda::std::abs;
using cuda::std::ceil;
using cuda::std::cos;
using cuda::std::exp;
using cuda::std::fabs;
using cuda::std::floor;
using cuda::std::fmax;
using cuda::std::fmin;
using cuda::std::isfinite;
using cuda::std::isinf;
using cuda::std::isnan;
using cuda::std::log;
using cuda::std::pow;
using cuda::std::sin;
using cuda::std::sqrt;
using cuda::std::tanh;
}  // namespace std
