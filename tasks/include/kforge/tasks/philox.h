// kforge's input generator, shared verbatim by the CPU (host C++) and the GPU (NVRTC) so both
// draw the same values: element i of input k under seed s is a pure function of (s, k, i,
// variant). Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
//
// Bit-identity: integer streams (rand, uniform, randint, bernoulli) are identical on CPU and GPU
// provided both sides compile without FMA contraction (host: -ffp-contract=off; NVRTC:
// --fmad=false). Normal draws go through log/sqrt/cos and may differ by a few ulp.
//
// This header must stay free of includes: NVRTC has no C library headers.
#ifndef KFORGE_TASKS_PHILOX_H
#define KFORGE_TASKS_PHILOX_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KFORGE_HD __host__ __device__ __forceinline__
#else
#define KFORGE_HD inline
#include <cmath>
#endif

namespace kforge_gen {

// Distribution codes; must match kforge::tasks::InitKind's order.
enum Kind { kRandn = 0, kNormal = 1, kRand = 2, kUniform = 3, kRandint = 4, kBernoulli = 5 };

struct Draw {
  unsigned int w[4];
};

KFORGE_HD Draw philox4x32_10(unsigned long long index, unsigned int input, unsigned int variant,
                             unsigned long long seed) {
  unsigned int c0 = static_cast<unsigned int>(index), c1 = static_cast<unsigned int>(index >> 32);
  unsigned int c2 = input, c3 = variant;
  unsigned int k0 = static_cast<unsigned int>(seed), k1 = static_cast<unsigned int>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    unsigned long long p0 = 0xD2511F53ull * c0;
    unsigned long long p1 = 0xCD9E8D57ull * c2;
    unsigned int hi0 = static_cast<unsigned int>(p0 >> 32), lo0 = static_cast<unsigned int>(p0);
    unsigned int hi1 = static_cast<unsigned int>(p1 >> 32), lo1 = static_cast<unsigned int>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  Draw d = {{c0, c1, c2, c3}};
  return d;
}

// 53 random bits as a double in [0, 1): exact on every IEEE machine.
KFORGE_HD double unit53(unsigned int a, unsigned int b) {
  return static_cast<double>((a >> 11) | (static_cast<unsigned long long>(b) << 21)) *
         (1.0 / 9007199254740992.0);
}

// A floating value (randn, normal, rand, uniform). `variant` 1 is the second distribution.
KFORGE_HD double sample_real(int kind, int variant, double p0, double p1, unsigned long long seed,
                             unsigned int input, unsigned long long index) {
  Draw d = philox4x32_10(index, input, static_cast<unsigned int>(variant), seed);
  double u = unit53(d.w[0], d.w[1]);
  if (kind == kRand || kind == kUniform) {
    double lo = kind == kRand ? 0.0 : p0, hi = kind == kRand ? 1.0 : p1;
    double t = variant ? u * u * u : u;
    return lo + (hi - lo) * t;
  }
  // Box-Muller on (0, 1] x [0, 1).
  double u1 = 1.0 - u, u2 = unit53(d.w[2], d.w[3]);
  double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
  double mean = kind == kRandn ? 0.0 : p0, std = kind == kRandn ? 1.0 : p1;
  if (variant) {
    mean += 0.5 * std;
    std *= 3.0;
  }
  return mean + std * z;
}

// An integer in [lo, hi) (randint). The second distribution draws lo and hi - 1 a quarter of
// the time each.
KFORGE_HD long long sample_int(int variant, long long lo, long long hi, unsigned long long seed,
                               unsigned int input, unsigned long long index) {
  Draw d = philox4x32_10(index, input, static_cast<unsigned int>(variant), seed);
  unsigned long long span = static_cast<unsigned long long>(hi - lo);
  unsigned long long r = (d.w[0] | (static_cast<unsigned long long>(d.w[1]) << 32)) % span;
  if (variant) {
    unsigned int pick = d.w[2] & 3u;
    if (pick == 0) return lo;
    if (pick == 1) return hi - 1;
  }
  return lo + static_cast<long long>(r);
}

// A bool, true with probability p (rand: p = 0.5); the second distribution uses p = 0.05.
KFORGE_HD bool sample_bool(int variant, double p, unsigned long long seed, unsigned int input,
                           unsigned long long index) {
  Draw d = philox4x32_10(index, input, static_cast<unsigned int>(variant), seed);
  return unit53(d.w[0], d.w[1]) < (variant ? 0.05 : p);
}

}  // namespace kforge_gen

#endif  // KFORGE_TASKS_PHILOX_H
