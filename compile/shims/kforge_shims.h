// kforge's NVRTC shims, pre-included in every candidate (NVRTC has no C library headers).
// Gives what nvcc users take for granted: fixed-width integers, FLT_MAX, INFINITY, INT_MAX.
#pragma once
#include <cuda/std/cstddef>
#include <cuda/std/cstdint>
using cuda::std::int16_t;
using cuda::std::int32_t;
using cuda::std::int64_t;
using cuda::std::int8_t;
using cuda::std::intptr_t;
using cuda::std::ptrdiff_t;
using cuda::std::uint16_t;
using cuda::std::uint32_t;
using cuda::std::uint64_t;
using cuda::std::uint8_t;
using cuda::std::uintptr_t;
namespace std {
using cuda::std::int16_t;
using cuda::std::int32_t;
using cuda::std::int64_t;
using cuda::std::int8_t;
using cuda::std::intptr_t;
using cuda::std::ptrdiff_t;
using cuda::std::size_t;
using cuda::std::uint16_t;
using cuda::std::uint32_t;
using cuda::std::uint64_t;
using cuda::std::uint8_t;
using cuda::std::uintptr_t;
}  // namespace std

#ifndef INT8_MIN
#define INT8_MIN (-128)
#define INT8_MAX 127
#define INT16_MIN (-32767 - 1)
#define INT16_MAX 32767
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define INT64_MIN (-9223372036854775807LL - 1)
#define INT64_MAX 9223372036854775807LL
#define UINT8_MAX 255
#define UINT16_MAX 65535
#define UINT32_MAX 4294967295U
#define UINT64_MAX 18446744073709551615ULL
#endif
#ifndef CHAR_BIT
#define CHAR_BIT 8
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define SHRT_MIN (-32768)
#define SHRT_MAX 32767
#define USHRT_MAX 65535
#define INT_MIN (-2147483647 - 1)
#define INT_MAX 2147483647
#define UINT_MAX 4294967295U
#define LONG_MIN (-9223372036854775807L - 1)
#define LONG_MAX 9223372036854775807L
#define ULONG_MAX 18446744073709551615UL
#define LLONG_MIN (-9223372036854775807LL - 1)
#define LLONG_MAX 9223372036854775807LL
#define ULLONG_MAX 18446744073709551615ULL
#endif
#ifndef FLT_MAX
#define FLT_MAX 3.402823466e+38F
#define FLT_MIN 1.175494351e-38F
#define FLT_EPSILON 1.192092896e-07F
#define DBL_MAX 1.7976931348623158e+308
#define DBL_MIN 2.2250738585072014e-308
#define DBL_EPSILON 2.2204460492503131e-16
#endif
// Spelled exactly as libcu++'s <cuda/std/cmath> spells them under NVRTC, so that header (pulled in
// by CUB) redefines them without a warning.
#include <cuda/std/limits>
#ifndef INFINITY
#define INFINITY _CUDA_VSTD::numeric_limits<float>::infinity()
#define NAN _CUDA_VSTD::numeric_limits<float>::quiet_NaN()
#endif
#ifndef HUGE_VALF
#define HUGE_VALF (__int_as_float(0x7f800000))
#define HUGE_VAL (__longlong_as_double(0x7ff0000000000000LL))
#endif
#ifndef M_PI
#define M_PI 3.14159265358979323846
#define M_SQRT2 1.41421356237309504880
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT1_2 0.70710678118654752440
#define M_E 2.7182818284590452354
#define M_LN2 0.69314718055994530942
#endif
