// Output comparison, poisoning and canaries: the judge's checks on what a candidate wrote.
//
// Contract (docs/design.md, "Acceptance rule"):
// - A floating output is accepted iff max|c − r64| <= max(tol · rms(r64), k · max|eager − r64|),
//   computed in float64. NaN in the reference accepts NaN; equal infinities match; any other
//   non-finite disagreement is an error of +inf. Integer and bool outputs must match exactly.
// - A candidate's wrong shape or dtype is data (`Comparison::problem`), never an exception. A
//   reference or eager output that does not fit the task is a harness bug: kforge::Error.
// - Everything runs as torch ops on the tensors' device, with one device-to-host copy per call.
//   Poison and canary patterns are pure functions of (seed, element or byte offset).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kforge/tasks/task.h"

namespace kforge::verify {

// tol(dtype) of the acceptance formula: 1e-4 float32, 1e-2 float16, 2e-2 bfloat16, 1e-10 float64,
// 0 for integer and bool dtypes.
double default_tolerance(tasks::Dtype dtype);
// k of the acceptance formula: how many times eager's own error a candidate may make.
inline constexpr double kEagerErrorFactor = 8;

// The verdict on one output, with the evidence kept for the archive.
struct Comparison {
  bool ok = false;
  std::string problem;  // non-empty for a shape or dtype mismatch; the numbers are then unset
  tasks::Dtype dtype = tasks::Dtype::Float32;  // the task's output dtype
  int64_t numel = 0;
  int64_t mismatches = 0;       // elements with |c − r64| > threshold (integers: c != r)
  double max_abs_error = 0;     // +inf when some error is non-finite (NaN where r64 is finite)
  double max_rel_error = 0;     // max |c − r64| / max(|r64|, tiny) where both are finite
  double normalized_error = 0;  // max_abs_error / rms_reference (max_abs_error when rms is 0)
  double threshold = 0;  // max(tolerance · rms_reference, eager_factor · eager_max_abs_error)
  double tolerance = 0;
  double eager_factor = 0;
  double rms_reference = 0;                 // over r64's finite elements
  double eager_max_abs_error = 0;           // over positions where eager's error is finite
  int64_t first_bad_index = -1;             // flat, row-major; -1 when no element is wrong
  std::vector<int64_t> first_bad_position;  // the same element as a multi-index
  double first_bad_value = 0;               // the candidate's value there
  double first_bad_expected = 0;            // r64's value there
  int64_t nan_count = 0;                    // NaN in the candidate where r64 is not NaN

  // Snake-case fields as above; non-finite numbers as the strings "inf", "-inf" and "nan".
  nlohmann::json to_json() const;
  // One line for people, e.g. "max abs error 3.1e-02 > threshold 1.2e-05 (tol 1e-04 x rms 0.12;
  // eager error 1.5e-06 x 8); 517 of 1048576 elements wrong, first at [3, 17]: 0.25 vs 0.28125".
  std::string summary() const;
};

// `candidate` must have the task's dtype and r64's shape (else `problem`). `reference64` is float64
// for floating dtypes and the task's dtype otherwise; `eager` has the task's dtype and r64's shape
// (else kforge::Error). r64 and eager are moved to the candidate's device when elsewhere.
// Works through the flat tensors `chunk` elements at a time (bounded temporaries); a chunk where
// everything is finite and within the threshold takes a short path (a few kernels), any other
// the full rules.
inline constexpr int64_t kCompareChunk = int64_t{1} << 26;
Comparison compare_output(const torch::Tensor& candidate, const torch::Tensor& reference64,
                          const torch::Tensor& eager, tasks::Dtype dtype, double tol,
                          double k = kEagerErrorFactor, int64_t chunk = kCompareChunk);

// max |a − b| over same-shaped tensors, with compare_output's rules (equal infinities and NaN
// against NaN are no error, NaN against a number is +inf); in chunks, so large outputs fit.
// Floating tensors take a fast path in float32 (float64 for float64: a rounding of at most half
// an ulp of the difference) and fall back to exact float64 rules where it meets NaN or infinity.
double max_abs_difference(const torch::Tensor& a, const torch::Tensor& b);

// Same shape, dtype and bytes (NaN payloads and the sign of zero included).
bool bitwise_equal(const torch::Tensor& a, const torch::Tensor& b);
// Elements whose bytes differ. Throws kforge::Error when shapes or dtypes differ.
int64_t bitwise_differences(const torch::Tensor& a, const torch::Tensor& b);

// What outputs and workspaces hold before a candidate launch.
// NaN: a quiet NaN for floating dtypes, bytes 0xA5 for integer and bool dtypes.
// RandomFinite: seed-dependent values per element (splitmix64 of the flat index): ±10^(6u − 3) for
// floating dtypes (magnitudes log-uniform in [1e-3, 1e3]), any bit pattern for integers, and bytes
// 0x80-0xFF for bool (never a valid bool, so an unwritten element never matches the reference).
enum class Poison { NaN, RandomFinite };
void poison(torch::Tensor& t, Poison kind, uint64_t seed);
// How many elements the candidate never wrote: those bitwise equal to their poison after both runs,
// run 1's (`first`, NaN poison) and run 2's (`second`, random finite poison). Both, because a
// kernel that writes one value everywhere matches run 2's random poison at some element now and
// then (one in 16 M-element outputs, seen on the GPU), and that element was written: run 1 shows
// it.
int64_t untouched_count(const torch::Tensor& first, const torch::Tensor& first_poison,
                        const torch::Tensor& second, const torch::Tensor& second_poison);

// Canaries: the slack bytes between a buffer's end and the unmapped gap (a uint8 tensor of any
// length) hold a seed-dependent, non-constant byte pattern; a changed byte is an out-of-bounds
// write. Both throw kforge::Error unless `bytes` is uint8.
struct CanaryCheck {
  int64_t overwritten = 0;    // bytes that no longer hold the pattern
  int64_t first_offset = -1;  // the first of them (flat), -1 when none
  bool ok() const { return overwritten == 0; }
};
void fill_canary(torch::Tensor& bytes, uint64_t seed);
CanaryCheck check_canary(const torch::Tensor& bytes, uint64_t seed);

}  // namespace kforge::verify
