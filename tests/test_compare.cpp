// Output comparison, poisoning and canaries (verify/compare.h): the acceptance formula's edge
// cases, the evidence kept for a wrong answer, and the byte-level checks around a candidate launch.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "kforge/common/error.h"
#include "kforge/verify/compare.h"

namespace {

using namespace kforge::verify;
using kforge::tasks::Dtype;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

torch::Tensor f64(std::vector<double> v) {
  return torch::tensor(v, torch::kFloat64);
}

// A float64 reference whose elements alternate +1 and -1: rms exactly 1.
torch::Tensor plus_minus_one(int64_t n) {
  return torch::arange(n, torch::kFloat64).remainder(2).mul(2).sub(1).neg();
}

Comparison compare_f32(const torch::Tensor& candidate64, const torch::Tensor& r64) {
  return compare_output(candidate64.to(torch::kFloat32), r64, r64.to(torch::kFloat32),
                        Dtype::Float32, default_tolerance(Dtype::Float32));
}

// splitmix64 on the host, in uint64 arithmetic: what poison's int64 torch arithmetic must equal.
uint64_t splitmix64(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The same bytes as an integer tensor.
torch::Tensor bits_of(const torch::Tensor& t) {
  switch (t.element_size()) {
    case 1:
      return t.view(torch::kByte);
    case 2:
      return t.view(torch::kShort);
    case 4:
      return t.view(torch::kInt);
    default:
      return t.view(torch::kLong);
  }
}

int64_t distinct(const torch::Tensor& t) {
  torch::Tensor s = std::get<0>(t.reshape(-1).to(torch::kLong).sort());
  return 1 + (s.slice(0, 1) != s.slice(0, 0, -1)).sum().item<int64_t>();
}

TEST(Compare, DefaultTolerances) {
  EXPECT_EQ(default_tolerance(Dtype::Float32), 1e-4);
  EXPECT_EQ(default_tolerance(Dtype::Float16), 1e-2);
  EXPECT_EQ(default_tolerance(Dtype::BFloat16), 2e-2);
  EXPECT_EQ(default_tolerance(Dtype::Float64), 1e-10);
  EXPECT_EQ(default_tolerance(Dtype::Int32), 0);
  EXPECT_EQ(default_tolerance(Dtype::Int64), 0);
  EXPECT_EQ(default_tolerance(Dtype::Bool), 0);
  EXPECT_EQ(kEagerErrorFactor, 8);
}

TEST(Compare, AllZeroAnswerIsRejectedAtAnyScale) {
  // rms 1: an all-zero answer is off by 1 everywhere.
  torch::Tensor r64 = plus_minus_one(1000);
  Comparison c = compare_f32(torch::zeros_like(r64), r64);
  EXPECT_FALSE(c.ok);
  EXPECT_DOUBLE_EQ(c.rms_reference, 1.0);
  EXPECT_DOUBLE_EQ(c.threshold, 1e-4);
  EXPECT_DOUBLE_EQ(c.normalized_error, 1.0);
  EXPECT_EQ(c.mismatches, 1000);
  // The same reference scaled by 1e-3: the absolute error (1e-3) would pass a loose atol of 1e-2,
  // but the threshold scales with the reference.
  torch::Tensor small = r64 * 1e-3;
  c = compare_f32(torch::zeros_like(small), small);
  EXPECT_FALSE(c.ok);
  EXPECT_NEAR(c.max_abs_error, 1e-3, 1e-12);
  EXPECT_NEAR(c.threshold, 1e-7, 1e-15);
  EXPECT_NEAR(c.normalized_error, 1.0, 1e-9);
  EXPECT_EQ(c.mismatches, 1000);
}

TEST(Compare, Float32RoundingErrorIsAccepted) {
  torch::Tensor r64 = torch::linspace(-3, 3, 4097, torch::kFloat64).sin() * 2 + 0.1;
  // A different float32 evaluation order: a few ulps away from the correctly rounded answer.
  torch::Tensor x = torch::linspace(-3, 3, 4097, torch::kFloat32);
  torch::Tensor candidate = (x.sin() * 3 + 0.15f) * (2.0f / 3.0f);
  Comparison c = compare_output(candidate, r64, r64.to(torch::kFloat32), Dtype::Float32, 1e-4);
  EXPECT_TRUE(c.ok) << c.summary();
  EXPECT_GT(c.max_abs_error, 0);
  EXPECT_LT(c.max_abs_error, 1e-5);
  EXPECT_DOUBLE_EQ(c.threshold, 1e-4 * c.rms_reference);  // eager's rounding error is smaller
  EXPECT_EQ(c.mismatches, 0);
  EXPECT_EQ(c.first_bad_index, -1);
  EXPECT_TRUE(c.first_bad_position.empty());
}

TEST(Compare, EagerErrorWidensTheThresholdByK) {
  torch::Tensor r64 = plus_minus_one(100);
  torch::Tensor eager = r64.clone();
  eager[10].add_(0.01);  // eager itself is off by 0.01: threshold 8 x 0.01
  torch::Tensor close = r64.clone(), far = r64.clone();
  close[20].add_(0.05);
  far[20].add_(0.09);
  auto run = [&](const torch::Tensor& cand, double k) {
    return compare_output(cand.to(torch::kFloat32), r64, eager.to(torch::kFloat32), Dtype::Float32,
                          1e-4, k);
  };
  Comparison c = run(close, kEagerErrorFactor);
  EXPECT_TRUE(c.ok) << c.summary();
  EXPECT_NEAR(c.eager_max_abs_error, 0.01, 1e-6);
  EXPECT_NEAR(c.threshold, 0.08, 1e-5);
  EXPECT_EQ(c.eager_factor, 8);
  EXPECT_FALSE(run(far, kEagerErrorFactor).ok);
  EXPECT_FALSE(run(close, 1).ok);  // k is what widens it
}

TEST(Compare, NaNInTheCandidateIsRejected) {
  torch::Tensor r64 = plus_minus_one(12).view({3, 4});
  torch::Tensor cand = r64.to(torch::kFloat32);
  cand[1][2] = kNaN;
  Comparison c = compare_output(cand, r64, r64.to(torch::kFloat32), Dtype::Float32, 1e-4);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.nan_count, 1);
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_EQ(c.max_abs_error, kInf);
  EXPECT_EQ(c.first_bad_index, 6);
  EXPECT_EQ(c.first_bad_position, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(std::isnan(c.first_bad_value));
  EXPECT_EQ(c.first_bad_expected, r64[1][2].item<double>());
  EXPECT_EQ(c.to_json()["max_abs_error"], "inf");
  EXPECT_EQ(c.to_json()["first_bad_value"], "nan");
  EXPECT_NE(c.summary().find("(1 NaN)"), std::string::npos) << c.summary();
}

TEST(Compare, NaNWhereTheReferenceIsNaNIsAccepted) {
  torch::Tensor r64 = f64({1, kNaN, -1, 1});
  torch::Tensor eager = r64.to(torch::kFloat32);
  Comparison c = compare_output(eager.clone(), r64, eager, Dtype::Float32, 1e-4);
  EXPECT_TRUE(c.ok) << c.summary();
  EXPECT_EQ(c.nan_count, 0);
  EXPECT_DOUBLE_EQ(c.rms_reference, 1.0);  // over the finite elements
  EXPECT_EQ(c.max_abs_error, 0);
  // A number where the reference says NaN is wrong.
  torch::Tensor cand = eager.clone();
  cand[1] = 0.0;
  c = compare_output(cand, r64, eager, Dtype::Float32, 1e-4);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.first_bad_index, 1);
  EXPECT_EQ(c.nan_count, 0);
}

TEST(Compare, MatchingInfinitiesAreAccepted) {
  torch::Tensor r64 = f64({kInf, -kInf, 2, -2});
  torch::Tensor eager = r64.to(torch::kFloat32);
  Comparison c = compare_output(eager.clone(), r64, eager, Dtype::Float32, 1e-4);
  EXPECT_TRUE(c.ok) << c.summary();
  EXPECT_EQ(c.max_abs_error, 0);
  EXPECT_DOUBLE_EQ(c.rms_reference, 2.0);

  torch::Tensor flipped = eager.clone();
  flipped[0] = -kInf;
  c = compare_output(flipped, r64, eager, Dtype::Float32, 1e-4);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.max_abs_error, kInf);
  EXPECT_EQ(c.first_bad_index, 0);

  torch::Tensor finite = eager.clone();
  finite[1] = -3.4e38f;
  EXPECT_FALSE(compare_output(finite, r64, eager, Dtype::Float32, 1e-4).ok);
  torch::Tensor overflow = eager.clone();
  overflow[2] = kInf;
  EXPECT_FALSE(compare_output(overflow, r64, eager, Dtype::Float32, 1e-4).ok);
}

TEST(Compare, EagerOverflowDoesNotAcceptEverything) {
  // eager's +inf where r64 is finite would make k x eager error infinite.
  torch::Tensor r64 = f64({1, -1, 1, -1});
  torch::Tensor eager = r64.to(torch::kFloat32);
  eager[3] = kInf;
  Comparison c = compare_output(torch::zeros({4}), r64, eager, Dtype::Float32, 1e-4);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.eager_max_abs_error, 0);
}

TEST(Compare, IntegersMustMatchExactly) {
  torch::Tensor ref = torch::arange(12, torch::kInt64).view({3, 4}) * 1000003;
  Comparison c = compare_output(ref.clone(), ref, ref, Dtype::Int64, 0);
  EXPECT_TRUE(c.ok) << c.summary();
  EXPECT_EQ(c.threshold, 0);

  torch::Tensor cand = ref.clone();
  cand[2][1].add_(1);
  c = compare_output(cand, ref, ref, Dtype::Int64, 0.5);  // a tolerance is ignored
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_EQ(c.first_bad_index, 9);
  EXPECT_EQ(c.first_bad_position, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(c.first_bad_value, 9000028);
  EXPECT_EQ(c.first_bad_expected, 9000027);
  EXPECT_EQ(c.max_abs_error, 1);
  EXPECT_EQ(c.threshold, 0);
  EXPECT_EQ(c.tolerance, 0);
  EXPECT_EQ(c.summary(),
            "exact match required; 1 of 12 elements differ, first at [2, 1]: 9000028 vs 9000027");

  torch::Tensor ref32 = torch::tensor({5, -7, 9}, torch::kInt32);
  torch::Tensor cand32 = ref32.clone();
  cand32[0] = 6;
  cand32[2] = 0;
  c = compare_output(cand32, ref32, ref32, Dtype::Int32, 0);
  EXPECT_EQ(c.mismatches, 2);
  EXPECT_EQ(c.first_bad_index, 0);
  EXPECT_EQ(c.max_abs_error, 9);
}

TEST(Compare, BoolOutputsCompareBytes) {
  torch::Tensor ref = torch::tensor({true, false, true, true});
  EXPECT_TRUE(compare_output(ref.clone(), ref, ref, Dtype::Bool, 0).ok);
  torch::Tensor cand = ref.clone();
  cand[1] = true;
  Comparison c = compare_output(cand, ref, ref, Dtype::Bool, 0);
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_EQ(c.first_bad_index, 1);
  // An element left poisoned (byte 0xA5) is not "true", whatever a bool read of it would say.
  torch::Tensor poisoned = ref.clone();
  poisoned.view(torch::kByte)[0] = 0xA5;
  c = compare_output(poisoned, ref, ref, Dtype::Bool, 0);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.first_bad_index, 0);
  EXPECT_EQ(c.first_bad_value, 0xA5);
  EXPECT_EQ(c.first_bad_expected, 1);
}

TEST(Compare, ShapeMismatchIsAProblem) {
  torch::Tensor r64 = torch::zeros({4, 6}, torch::kFloat64);
  Comparison c =
      compare_output(torch::zeros({4, 5}), r64, torch::zeros({4, 6}), Dtype::Float32, 1e-4);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.problem, "shape [4, 5] but the reference has [4, 6]");
  EXPECT_EQ(c.summary(), c.problem);
  EXPECT_EQ(c.to_json()["problem"], c.problem);
  // Same element count, other shape: still wrong.
  c = compare_output(torch::zeros({6, 4}), r64, torch::zeros({4, 6}), Dtype::Float32, 1e-4);
  EXPECT_EQ(c.problem, "shape [6, 4] but the reference has [4, 6]");
}

TEST(Compare, DtypeMismatchIsAProblem) {
  torch::Tensor r64 = torch::ones({3}, torch::kFloat64);
  Comparison c = compare_output(r64.clone(), r64, torch::ones({3}), Dtype::Float32, 1e-4);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.problem, "dtype float64 but the task's output is float32");
  c = compare_output(torch::ones({2}, torch::kFloat16), r64, torch::ones({3}), Dtype::Float32,
                     1e-4);
  EXPECT_EQ(c.problem,
            "dtype float16 but the task's output is float32; shape [2] but the reference has [3]");
}

TEST(Compare, AReferenceThatDoesNotFitIsAHarnessError) {
  torch::Tensor f32 = torch::ones({3});
  EXPECT_THROW(compare_output(f32, f32, f32, Dtype::Float32, 1e-4), kforge::Error);
  torch::Tensor r64 = torch::ones({3}, torch::kFloat64);
  EXPECT_THROW(compare_output(f32, r64, r64, Dtype::Float32, 1e-4), kforge::Error);
  EXPECT_THROW(compare_output(f32, r64, torch::ones({4}), Dtype::Float32, 1e-4), kforge::Error);
  torch::Tensor i64 = torch::ones({3}, torch::kInt64);
  EXPECT_THROW(compare_output(i64, i64.to(torch::kFloat64), i64, Dtype::Int64, 0), kforge::Error);
}

TEST(Compare, Float16UsesItsOwnTolerance) {
  torch::Tensor r64 = torch::linspace(-1, 1, 1001, torch::kFloat64);
  torch::Tensor eager = r64.to(torch::kFloat16);  // correctly rounded: error <= 2^-12
  const double tol = default_tolerance(Dtype::Float16);
  Comparison exact = compare_output(eager.clone(), r64, eager, Dtype::Float16, tol);
  ASSERT_TRUE(exact.ok) << exact.summary();
  const double threshold = exact.threshold;
  EXPECT_DOUBLE_EQ(threshold, tol * exact.rms_reference);  // 8 x 2^-12 < 1e-2 x 0.58
  EXPECT_LE(exact.eager_max_abs_error, 1.0 / 4096);

  torch::Tensor within = (r64 + 0.5 * threshold).to(torch::kFloat16);
  torch::Tensor beyond = (r64 + 2 * threshold).to(torch::kFloat16);
  EXPECT_TRUE(compare_output(within, r64, eager, Dtype::Float16, tol).ok);
  Comparison c = compare_output(beyond, r64, eager, Dtype::Float16, tol);
  EXPECT_FALSE(c.ok);
  EXPECT_GT(c.mismatches, 900);
  // The error float16 forgives is far too much for float32.
  EXPECT_FALSE(compare_f32(within.to(torch::kFloat64), r64).ok);
}

TEST(Compare, BFloat16Output) {
  torch::Tensor r64 = torch::linspace(-4, 4, 513, torch::kFloat64);
  torch::Tensor eager = r64.to(torch::kBFloat16);
  EXPECT_TRUE(compare_output(eager.clone(), r64, eager, Dtype::BFloat16, 2e-2).ok);
  EXPECT_FALSE(compare_output(torch::zeros_like(eager), r64, eager, Dtype::BFloat16, 2e-2).ok);
}

TEST(Compare, EmptyOutputsAreOk) {
  torch::Tensor r64 = torch::zeros({0, 5}, torch::kFloat64);
  Comparison c =
      compare_output(torch::zeros({0, 5}), r64, torch::zeros({0, 5}), Dtype::Float32, 1e-4);
  EXPECT_TRUE(c.ok);
  EXPECT_EQ(c.numel, 0);
  EXPECT_EQ(c.first_bad_index, -1);
  EXPECT_FALSE(c.summary().empty());
  torch::Tensor i = torch::zeros({0}, torch::kInt32);
  EXPECT_TRUE(compare_output(i, i, i, Dtype::Int32, 0).ok);
  // Empty against non-empty is a shape problem, not "ok".
  EXPECT_FALSE(compare_output(torch::zeros({0}), torch::zeros({1}, torch::kFloat64),
                              torch::zeros({1}), Dtype::Float32, 1e-4)
                   .ok);
}

TEST(Compare, EvidenceOfAWrongAnswer) {
  torch::Tensor r64 = plus_minus_one(32).view({4, 8}) * 0.5;  // rms 0.5
  torch::Tensor cand = r64.clone();
  cand[3][0].add_(0.25);
  cand[1][3] = 0.25;      // expected -0.5 (index 11 is odd)
  cand[2][7].sub_(1e-6);  // within the threshold of 5e-5: not counted
  cand[2][2] = -0.125;    // expected 0.5
  Comparison c = compare_f32(cand, r64);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.numel, 32);
  EXPECT_EQ(c.mismatches, 3);
  EXPECT_EQ(c.first_bad_index, 11);
  EXPECT_EQ(c.first_bad_position, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(c.first_bad_value, 0.25);
  EXPECT_EQ(c.first_bad_expected, -0.5);
  EXPECT_DOUBLE_EQ(c.rms_reference, 0.5);
  EXPECT_DOUBLE_EQ(c.threshold, 5e-5);
  EXPECT_DOUBLE_EQ(c.max_abs_error, 0.75);
  EXPECT_DOUBLE_EQ(c.normalized_error, 1.5);
  EXPECT_DOUBLE_EQ(c.max_rel_error, 1.5);
  EXPECT_EQ(c.eager_max_abs_error, 0);
  EXPECT_EQ(c.nan_count, 0);
  EXPECT_EQ(c.summary(),
            "max abs error 7.5e-01 > threshold 5.0e-05 (tol 1e-04 x rms 0.5; eager error 0.0e+00 x "
            "8); 3 of 32 elements wrong, first at [1, 3]: 0.25 vs -0.5");
  nlohmann::json j = c.to_json();
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["dtype"], "float32");
  EXPECT_EQ(j["mismatches"], 3);
  EXPECT_EQ(j["first_bad_index"], 11);
  EXPECT_EQ(j["first_bad_position"], nlohmann::json({1, 3}));
  EXPECT_EQ(j["first_bad_expected"], -0.5);
  EXPECT_EQ(j["threshold"], 5e-5);
  for (const char* key : {"numel", "max_abs_error", "max_rel_error", "normalized_error",
                          "rms_reference", "eager_max_abs_error", "first_bad_value", "nan_count",
                          "tolerance", "eager_factor", "problem"})
    EXPECT_TRUE(j.contains(key)) << key;

  // A non-contiguous candidate is read in its logical (row-major) order.
  torch::Tensor transposed = cand.to(torch::kFloat32).t().contiguous().t();
  ASSERT_FALSE(transposed.is_contiguous());
  Comparison t = compare_output(transposed, r64, r64.to(torch::kFloat32), Dtype::Float32, 1e-4);
  EXPECT_EQ(t.first_bad_position, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(t.mismatches, 3);
}

// The short path of a chunk where everything is finite and within the threshold must give what the
// full rules give, whatever the chunking: chunks of 1, 7 and 64 elements against one chunk.
TEST(Compare, ChunkingAndTheShortPathAgreeWithTheFullRules) {
  torch::manual_seed(3);
  torch::Tensor r64 = torch::randn({10, 50}, torch::kFloat64);
  torch::Tensor eager = (r64 + 1e-7 * torch::randn({10, 50}, torch::kFloat64)).to(torch::kFloat32);
  struct Case {
    const char* what;
    std::function<void(torch::Tensor&, torch::Tensor&)> edit;  // candidate (float64), reference
  };
  std::vector<Case> cases = {
      {"all within", [](torch::Tensor&, torch::Tensor&) {}},
      {"one wrong late", [](torch::Tensor& c, torch::Tensor&) { c[9][48] += 1.0; }},
      {"wrong in two chunks",
       [](torch::Tensor& c, torch::Tensor&) { c[0][3] -= 0.5, c[7][1] += 2.0; }},
      {"NaN late", [](torch::Tensor& c, torch::Tensor&) { c[8][8] = kNaN; }},
      {"infinity", [](torch::Tensor& c, torch::Tensor&) { c[4][20] = kInf; }},
      {"matching infinities and NaNs",
       [](torch::Tensor& c, torch::Tensor& r) {
         c[2][2] = kInf, r[2][2] = kInf, c[6][6] = kNaN, r[6][6] = kNaN;
       }},
      {"reference zero, candidate not",
       [](torch::Tensor& c, torch::Tensor& r) { r[5][5] = 0, c[5][5] = 1e-9; }},
      {"huge finite reference (its square overflows)",
       [](torch::Tensor& c, torch::Tensor& r) { r[1][1] = 1e200, c[1][1] = 1e200; }},
  };
  for (const Case& k : cases) {
    torch::Tensor cand = r64.clone(), ref = r64.clone();
    k.edit(cand, ref);
    torch::Tensor eag = eager.clone();
    eag.view(-1).masked_scatter_(torch::isfinite(ref).logical_not().view(-1),
                                 ref.view(-1)
                                     .masked_select(torch::isfinite(ref).logical_not().view(-1))
                                     .to(torch::kFloat32));
    Comparison whole = compare_output(cand.to(torch::kFloat32), ref, eag, Dtype::Float32, 1e-4,
                                      kEagerErrorFactor, 1 << 20);
    for (int64_t chunk : {1, 7, 64}) {
      Comparison part = compare_output(cand.to(torch::kFloat32), ref, eag, Dtype::Float32, 1e-4,
                                       kEagerErrorFactor, chunk);
      SCOPED_TRACE(std::string(k.what) + ", chunk " + std::to_string(chunk));
      EXPECT_EQ(part.ok, whole.ok);
      EXPECT_EQ(part.mismatches, whole.mismatches);
      EXPECT_EQ(part.nan_count, whole.nan_count);
      EXPECT_EQ(part.first_bad_index, whole.first_bad_index);
      EXPECT_EQ(part.first_bad_position, whole.first_bad_position);
      EXPECT_EQ(part.max_abs_error, whole.max_abs_error);
      EXPECT_EQ(part.max_rel_error, whole.max_rel_error);
      EXPECT_EQ(part.eager_max_abs_error, whole.eager_max_abs_error);
      EXPECT_NEAR(part.rms_reference, whole.rms_reference, 1e-12 * whole.rms_reference);
      EXPECT_NEAR(part.threshold, whole.threshold, 1e-12 * whole.threshold);
    }
    if (std::string(k.what) == "all within") {  // the short path against the formula, computed here
      torch::Tensor c64 = cand.to(torch::kFloat32).to(torch::kFloat64);
      EXPECT_TRUE(whole.ok);
      EXPECT_EQ(whole.max_abs_error, (c64 - ref).abs().max().item<double>());
      EXPECT_EQ(whole.max_rel_error, ((c64 - ref).abs() / ref.abs()).max().item<double>());
      double rms = std::sqrt(ref.square().mean().item<double>());
      double eager_err = (eag.to(torch::kFloat64) - ref).abs().max().item<double>();
      EXPECT_NEAR(whole.rms_reference, rms, 1e-12 * rms);
      EXPECT_NEAR(whole.threshold, std::max(rms * 1e-4, eager_err * kEagerErrorFactor),
                  1e-12 * whole.threshold);
      EXPECT_EQ(whole.eager_max_abs_error, eager_err);
    }
    if (std::string(k.what) == "wrong in two chunks") {
      EXPECT_EQ(whole.mismatches, 2);
      EXPECT_EQ(whole.first_bad_index, 3);
      EXPECT_NEAR(whole.max_abs_error, 2.0, 1e-6);  // the float32 rounding of r + 2
    }
    if (std::string(k.what) == "NaN late") EXPECT_EQ(whole.nan_count, 1);
    if (std::string(k.what).rfind("huge", 0) == 0) {  // squares overflow: the rms is found scaled
      EXPECT_NEAR(whole.rms_reference, 1e200 / std::sqrt(500.0), 1e188);
      EXPECT_TRUE(std::isfinite(whole.threshold));
      torch::Tensor nan_answer = cand.clone();
      nan_answer[0][0] = kNaN;
      EXPECT_FALSE(
          compare_output(nan_answer.to(torch::kFloat64), ref, ref, Dtype::Float64, 1e-10).ok);
    }
    EXPECT_TRUE(torch::equal(ref.isnan(), ref.isnan()));  // (the reference is read, never written:)
    EXPECT_TRUE(torch::allclose(ref.nan_to_num(), [&] {
      torch::Tensor again = r64.clone();
      k.edit(cand, again);
      return again.nan_to_num();
    }()));
    if (std::string(k.what) == "matching infinities and NaNs")
      EXPECT_TRUE(whole.ok) << whole.summary();
  }
  EXPECT_THROW(compare_output(r64, r64, eager, Dtype::Float32, 1e-4, kEagerErrorFactor, 0),
               kforge::Error);

  // Only eager non-finite (its overflow): pass 1 leaves the short path for that chunk alone.
  torch::Tensor eag = eager.clone();
  eag[3][3] = std::numeric_limits<float>::infinity();
  Comparison whole = compare_output(r64.to(torch::kFloat32), r64, eag, Dtype::Float32, 1e-4,
                                    kEagerErrorFactor, 1 << 20);
  Comparison part =
      compare_output(r64.to(torch::kFloat32), r64, eag, Dtype::Float32, 1e-4, kEagerErrorFactor, 7);
  EXPECT_TRUE(whole.ok);
  EXPECT_EQ(part.eager_max_abs_error, whole.eager_max_abs_error);
  EXPECT_LT(whole.eager_max_abs_error, 1e-5);                   // the infinite error is not counted
  EXPECT_NEAR(part.rms_reference, whole.rms_reference, 1e-12);  // summed in another order

  // float16 outputs: the same agreement.
  torch::Tensor h = r64.to(torch::kHalf);
  torch::Tensor bad = h.clone();
  bad[6][40] = 3.0;
  for (const torch::Tensor& cand : {h, bad}) {
    Comparison hw = compare_output(cand, r64, h, Dtype::Float16, 1e-2, kEagerErrorFactor, 1 << 20);
    Comparison hp = compare_output(cand, r64, h, Dtype::Float16, 1e-2, kEagerErrorFactor, 64);
    EXPECT_EQ(hp.ok, hw.ok);
    EXPECT_EQ(hp.mismatches, hw.mismatches);
    EXPECT_EQ(hp.first_bad_index, hw.first_bad_index);
    EXPECT_EQ(hp.max_abs_error, hw.max_abs_error);
  }
  EXPECT_FALSE(compare_output(bad, r64, h, Dtype::Float16, 1e-2).ok);
}

TEST(Compare, BitwiseEqualitySeesNaNPayloadsAndTheSignOfZero) {
  torch::Tensor a = torch::tensor({0x7FC00000, 0x7FC00001, 0}, torch::kInt32).view(torch::kFloat32);
  torch::Tensor b = a.clone();
  EXPECT_FALSE((a == b).all().item<bool>());  // NaN != NaN as values...
  EXPECT_TRUE(bitwise_equal(a, b));           // ...but the bytes match
  EXPECT_EQ(bitwise_differences(a, b), 0);
  b.view(torch::kInt32)[1] = 0x7FC00002;  // another NaN payload
  EXPECT_FALSE(bitwise_equal(a, b));
  EXPECT_EQ(bitwise_differences(a, b), 1);
  b[2] = -0.0;
  EXPECT_TRUE((a[2] == b[2]).item<bool>());  // 0.0 == -0.0 as values
  EXPECT_EQ(bitwise_differences(a, b), 2);

  torch::Tensor h = torch::tensor({0.0, 1.0}).to(torch::kFloat16), h2 = h.clone();
  h2[0] = -0.0;
  EXPECT_EQ(bitwise_differences(h, h2), 1);
  torch::Tensor bf = torch::tensor({0.0, 1.0}).to(torch::kBFloat16), bf2 = bf.clone();
  bf2[1] = 1.0078125;  // the next bfloat16 after 1
  EXPECT_EQ(bitwise_differences(bf, bf2), 1);
  torch::Tensor l = torch::arange(5, torch::kInt64), l2 = l.clone();
  l2[4] = 5;
  EXPECT_EQ(bitwise_differences(l, l2), 1);
  torch::Tensor t = torch::tensor({true, false}), t2 = t.clone();
  EXPECT_TRUE(bitwise_equal(t, t2));
  t2.view(torch::kByte)[0] = 2;  // "true" too, by another byte
  EXPECT_FALSE(bitwise_equal(t, t2));

  EXPECT_FALSE(bitwise_equal(torch::zeros({2, 3}), torch::zeros({3, 2})));
  EXPECT_FALSE(bitwise_equal(torch::zeros({2}), torch::zeros({2}, torch::kInt32)));
  EXPECT_THROW(bitwise_differences(torch::zeros({2}), torch::zeros({3})), kforge::Error);
  EXPECT_THROW(bitwise_differences(torch::zeros({2}), torch::zeros({2}, torch::kInt32)),
               kforge::Error);
  EXPECT_TRUE(bitwise_equal(torch::zeros({0}), torch::zeros({0})));
}

// The check on every timed output: a float32 fast path, exact rules where NaN or inf appear.
TEST(Compare, MaxAbsDifferenceFastPathAndItsExactFallback) {
  auto f32 = [](std::vector<double> v) { return f64(std::move(v)).to(torch::kFloat32); };
  EXPECT_NEAR(max_abs_difference(f32({1.0, 2.0, 3.0}), f32({1.0, 2.5, 2.0})), 1.0, 1e-7);
  EXPECT_EQ(max_abs_difference(f32({1.0, -2.0}), f32({1.0, -2.0})), 0.0);
  // Exact rules: NaN against NaN and equal infinities are no error; NaN or inf against a number is.
  EXPECT_EQ(max_abs_difference(f32({kNaN, 1.0}), f32({kNaN, 1.0})), 0.0);
  EXPECT_EQ(max_abs_difference(f32({kInf, -kInf, 1.0}), f32({kInf, -kInf, 1.5})), 0.5);
  EXPECT_EQ(max_abs_difference(f32({kNaN, 1.0}), f32({0.0, 1.0})), kInf);
  EXPECT_EQ(max_abs_difference(f32({1.0, 1.0}), f32({1.0, kNaN})), kInf);
  EXPECT_EQ(max_abs_difference(f32({kInf}), f32({1.0})), kInf);
  // Half-precision inputs are widened, float64 stays float64 (a float32 difference would round
  // 1e-12 away).
  EXPECT_NEAR(
      max_abs_difference(f32({1.0, 2.0}).to(torch::kHalf), f32({1.0, 2.5}).to(torch::kHalf)), 0.5,
      1e-6);
  EXPECT_EQ(max_abs_difference(f64({1.0}), f64({1.0 + 1e-12})), std::abs(1.0 - (1.0 + 1e-12)));
  // Shapes are flattened; the empty tensor has no difference.
  EXPECT_EQ(
      max_abs_difference(f32({1, 2, 3, 4}).reshape({2, 2}), f32({1, 2, 3, 5}).reshape({2, 2})),
      1.0);
  EXPECT_EQ(max_abs_difference(f32({}), f32({})), 0.0);
}

TEST(Compare, PoisonNaN) {
  for (auto type : {torch::kFloat32, torch::kFloat16, torch::kBFloat16, torch::kFloat64}) {
    torch::Tensor t = torch::zeros({7, 5}, type).t();  // non-contiguous: every element still
    poison(t, Poison::NaN, 1);
    EXPECT_TRUE(torch::isnan(t).all().item<bool>()) << c10::toString(type);
  }
  torch::Tensor l = torch::zeros({9}, torch::kInt64);
  poison(l, Poison::NaN, 1);
  EXPECT_TRUE((l == static_cast<int64_t>(0xA5A5A5A5A5A5A5A5ull)).all().item<bool>());
  torch::Tensor i = torch::zeros({9}, torch::kInt32);
  poison(i, Poison::NaN, 1);
  EXPECT_TRUE((i == static_cast<int32_t>(0xA5A5A5A5u)).all().item<bool>());
  torch::Tensor b = torch::zeros({9}, torch::kBool);
  poison(b, Poison::NaN, 1);
  EXPECT_TRUE((b.view(torch::kByte) == 0xA5).all().item<bool>());
}

TEST(Compare, PoisonRandomFinite) {
  const int64_t n = 4096;
  for (auto type : {torch::kFloat32, torch::kFloat16, torch::kBFloat16, torch::kFloat64,
                    torch::kInt64, torch::kInt32, torch::kBool}) {
    SCOPED_TRACE(c10::toString(type));
    torch::Tensor a = torch::zeros({n}, type), again = torch::zeros({n}, type),
                  other = torch::zeros({n}, type);
    poison(a, Poison::RandomFinite, 7);
    poison(again, Poison::RandomFinite, 7);
    poison(other, Poison::RandomFinite, 8);
    EXPECT_TRUE(bitwise_equal(a, again));                  // deterministic for a seed
    EXPECT_GT(bitwise_differences(a, other), n * 9 / 10);  // another seed, other values
    const int64_t values = distinct(bits_of(a));
    if (type == torch::kBool) {
      torch::Tensor bytes = a.view(torch::kByte);
      EXPECT_TRUE((bytes >= 0x80).all().item<bool>());  // never a valid bool
      EXPECT_EQ(values, 128);
    } else if (c10::isFloatingType(type)) {
      torch::Tensor v = a.to(torch::kFloat64);
      EXPECT_TRUE(torch::isfinite(v).all().item<bool>());
      EXPECT_LE(v.abs().max().item<double>(), 1e3);
      EXPECT_GT(v.abs().max().item<double>(), 900);  // spread over the range
      EXPECT_LT(v.abs().min().item<double>(), 10);
      // Distinct per element, but for collisions in bfloat16's 8-bit and float16's 11-bit
      // significands (4096 draws over 12 binades per sign).
      EXPECT_GE(values, type == torch::kBFloat16 ? 2700 : type == torch::kFloat16 ? 3800 : n);
    } else {
      EXPECT_EQ(values, n);  // arbitrary bit patterns: distinct per element
    }
  }
}

TEST(Compare, PoisonIntegersAreSplitmix64) {
  // Pins the int64 torch arithmetic (wrapping products, logical shifts) to the uint64 algorithm.
  torch::Tensor l = torch::zeros({1000}, torch::kInt64);
  poison(l, Poison::RandomFinite, 0x1234567890ABCDEFull);
  torch::Tensor i = torch::zeros({1000}, torch::kInt32);
  poison(i, Poison::RandomFinite, 0x1234567890ABCDEFull);
  for (int64_t k : {0, 1, 2, 500, 999}) {
    uint64_t want = splitmix64(0x1234567890ABCDEFull, k);
    EXPECT_EQ(static_cast<uint64_t>(l[k].item<int64_t>()), want) << k;
    EXPECT_EQ(static_cast<uint32_t>(i[k].item<int32_t>()), static_cast<uint32_t>(want)) << k;
  }
}

TEST(Compare, UntouchedCount) {
  // Run 1 leaves NaN poison where it does not write, run 2 random finite poison.
  torch::Tensor nan = torch::zeros({10, 10}), finite = torch::zeros({10, 10});
  poison(nan, Poison::NaN, 3);
  poison(finite, Poison::RandomFinite, 4);
  torch::Tensor out1 = nan.clone(), out2 = finite.clone();
  EXPECT_EQ(untouched_count(out1, nan, out2, finite), 100);  // NaN == NaN here: bytes, not values
  out1.slice(0, 0, 6).fill_(1.0);
  out2.slice(0, 0, 6).fill_(1.0);
  EXPECT_EQ(untouched_count(out1, nan, out2, finite), 40);

  // One value written everywhere that happens to equal run 2's poison at one element: written (run
  // 1 shows it), so not counted.
  const float value = finite[7][3].item<float>();
  out1.fill_(value);
  out2.fill_(value);
  EXPECT_EQ(untouched_count(out1, nan, out2, finite), 0);

  torch::Tensor ints_nan = torch::zeros({64}, torch::kInt32),
                ints_finite = torch::zeros({64}, torch::kInt32);
  poison(ints_nan, Poison::NaN, 9);
  poison(ints_finite, Poison::RandomFinite, 9);
  torch::Tensor i1 = ints_nan.clone(), i2 = ints_finite.clone();
  i1.slice(0, 0, 63).fill_(0);
  i2.slice(0, 0, 63).fill_(0);
  EXPECT_EQ(untouched_count(i1, ints_nan, i2, ints_finite), 1);
}

TEST(Compare, CanaryDetectsOneChangedByte) {
  torch::Tensor bytes = torch::zeros({1000}, torch::kByte);
  fill_canary(bytes, 11);
  CanaryCheck check = check_canary(bytes, 11);
  EXPECT_TRUE(check.ok());
  EXPECT_EQ(check.first_offset, -1);

  bytes[357] = bytes[357].item<int64_t>() ^ 1;  // one bit of one byte
  check = check_canary(bytes, 11);
  EXPECT_FALSE(check.ok());
  EXPECT_EQ(check.overwritten, 1);
  EXPECT_EQ(check.first_offset, 357);
  bytes[900] = bytes[900].item<int64_t>() ^ 0x80;
  bytes[999] = bytes[999].item<int64_t>() ^ 0xFF;
  check = check_canary(bytes, 11);
  EXPECT_EQ(check.overwritten, 3);
  EXPECT_EQ(check.first_offset, 357);

  fill_canary(bytes, 11);
  EXPECT_TRUE(check_canary(bytes, 11).ok());
  EXPECT_GT(check_canary(bytes, 12).overwritten, 900);  // the pattern depends on the seed
  // Zeros (what a careless write leaves) are not the pattern.
  EXPECT_GT(check_canary(torch::zeros({1000}, torch::kByte), 11).overwritten, 980);
  torch::Tensor none = torch::zeros({0}, torch::kByte);
  fill_canary(none, 11);
  EXPECT_TRUE(check_canary(none, 11).ok());
}

TEST(Compare, CanaryPatternIsNotConstant) {
  torch::Tensor bytes = torch::zeros({4096}, torch::kByte);
  fill_canary(bytes, 5);
  EXPECT_EQ(distinct(bytes), 256);
  EXPECT_FALSE(torch::equal(bytes.slice(0, 0, 2048), bytes.slice(0, 2048)));  // no short period
  torch::Tensor floats = torch::zeros({8});
  EXPECT_THROW(fill_canary(floats, 5), kforge::Error);
  EXPECT_THROW(check_canary(floats, 5), kforge::Error);
}

}  // namespace
