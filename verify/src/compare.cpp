#include "kforge/verify/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "kforge/common/error.h"
#include "kforge/common/strings.h"
#include "kforge/tasks/generator.h"

namespace kforge::verify {
namespace {

using tasks::Dtype;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kCanaryStream = 0xC3A5C85C97CB3127ull;  // canaries and poison draw apart

template <typename... Args>
std::string printf_string(const char* f, Args... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

std::string type_name(torch::ScalarType t) {
  if (auto d = tasks::from_scalar_type(t)) return std::string(tasks::dtype_name(*d));
  return c10::toString(t);
}

// The integer dtype of the same element size: its values are the elements' bytes.
torch::Tensor bits(const torch::Tensor& t) {
  switch (t.element_size()) {
    case 1:
      return t.view(torch::kByte);
    case 2:
      return t.view(torch::kShort);
    case 4:
      return t.view(torch::kInt);
    case 8:
      return t.view(torch::kLong);
  }
  throw Error("bitwise comparison: unsupported element size " + std::to_string(t.element_size()) +
              " (" + type_name(t.scalar_type()) + ")");
}

// C++20 conversions to signed types are modular; torch's int64 arithmetic wraps the same way.
int64_t as_signed(uint64_t v) {
  return static_cast<int64_t>(v);
}

torch::Tensor shift_right_logical(const torch::Tensor& x, int s) {
  return torch::bitwise_and(torch::bitwise_right_shift(x, s), as_signed(~0ull >> s));
}

// splitmix64's output i for i in [0, n): mix(seed + (i + 1) · golden), as int64 on opts' device.
torch::Tensor splitmix64(int64_t n, uint64_t seed, const torch::TensorOptions& opts,
                         int64_t start = 0) {
  torch::Tensor z = torch::arange(start + 1, start + n + 1, opts.dtype(torch::kLong));
  z = z.mul(as_signed(kGolden)).add(as_signed(seed));
  z = torch::bitwise_xor(z, shift_right_logical(z, 30)).mul(as_signed(0xBF58476D1CE4E5B9ull));
  z = torch::bitwise_xor(z, shift_right_logical(z, 27)).mul(as_signed(0x94D049BB133111EBull));
  return torch::bitwise_xor(z, shift_right_logical(z, 31));
}

// Flat float64 copy on `device`; bool through its bytes, so a non-0/1 byte shows as itself. A
// float64 tensor already on `device` comes back as a view of it: never modify the result in place.
torch::Tensor flat64(const torch::Tensor& t, const torch::Device& device) {
  torch::Tensor x = t.scalar_type() == torch::kBool ? t.view(torch::kByte) : t;
  return x.to(device).reshape(-1).to(torch::kFloat64);
}

// |x − r| per element: 0 where both are NaN or x == r (equal infinities), +inf for other NaN.
torch::Tensor abs_error(const torch::Tensor& x, const torch::Tensor& r) {
  torch::Tensor err = (x - r).abs().masked_fill(x == r, 0.0);
  err = err.masked_fill(torch::isnan(err), kInf);
  return err.masked_fill(torch::isnan(x).logical_and(torch::isnan(r)), 0.0);
}

std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> pos(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    pos[d] = flat % sizes[d];
    flat /= sizes[d];
  }
  return pos;
}

nlohmann::json number(double v) {
  if (std::isfinite(v)) return v;
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

void require_bytes(const torch::Tensor& bytes, const char* what) {
  if (bytes.scalar_type() != torch::kByte)
    throw Error(std::string(what) + ": canary bytes must be uint8, not " +
                type_name(bytes.scalar_type()));
}

torch::Tensor canary_pattern(const torch::Tensor& bytes, uint64_t seed) {
  torch::Tensor h = splitmix64(bytes.numel(), seed ^ kCanaryStream, bytes.options());
  return torch::bitwise_and(h, 0xFF).to(torch::kByte).view(bytes.sizes());
}

}  // namespace

double default_tolerance(Dtype dtype) {
  switch (dtype) {
    case Dtype::Float32:
      return 1e-4;
    case Dtype::Float16:
      return 1e-2;
    case Dtype::BFloat16:
      return 2e-2;
    case Dtype::Float64:
      return 1e-10;
    case Dtype::Int32:
    case Dtype::Int64:
    case Dtype::Bool:
      return 0;
  }
  throw Error("default_tolerance: unknown dtype");
}

Comparison compare_output(const torch::Tensor& candidate, const torch::Tensor& reference64,
                          const torch::Tensor& eager, Dtype dtype, double tol, double k,
                          int64_t chunk) {
  if (chunk <= 0) throw Error("compare_output: chunk must be positive");
  const bool floating = tasks::is_floating(dtype);
  const torch::ScalarType want = tasks::to_scalar_type(dtype);
  const torch::ScalarType want_reference = floating ? torch::kFloat64 : want;
  if (reference64.scalar_type() != want_reference)
    throw Error("compare_output: the reference has dtype " + type_name(reference64.scalar_type()) +
                ", expected " + type_name(want_reference));
  if (eager.scalar_type() != want)
    throw Error("compare_output: the eager output has dtype " + type_name(eager.scalar_type()) +
                ", expected " + type_name(want));
  if (!eager.sizes().equals(reference64.sizes()))
    throw Error("compare_output: the eager output has shape " + format_shape(eager.sizes().vec()) +
                " but the reference has " + format_shape(reference64.sizes().vec()));

  Comparison out;
  out.dtype = dtype;
  out.tolerance = floating ? tol : 0;
  out.eager_factor = floating ? k : 0;
  out.numel = candidate.numel();
  if (candidate.scalar_type() != want)
    out.problem = "dtype " + type_name(candidate.scalar_type()) + " but the task's output is " +
                  type_name(want);
  if (!candidate.sizes().equals(reference64.sizes()))
    out.problem += (out.problem.empty() ? "" : "; ") + std::string("shape ") +
                   format_shape(candidate.sizes().vec()) + " but the reference has " +
                   format_shape(reference64.sizes().vec());
  if (!out.problem.empty()) return out;
  if (out.numel == 0) {
    out.ok = true;
    return out;
  }

  // In chunks of the flat tensors, so temporaries stay bounded (outputs can hold 2^31 elements).
  const torch::Device device = candidate.device();
  const int64_t n = out.numel;
  torch::Tensor cand = candidate.reshape(-1), ref = reference64.reshape(-1),
                eag = eager.reshape(-1);
  auto slice = [&](const torch::Tensor& t, int64_t off) {
    return t.slice(0, off, std::min(off + chunk, n));
  };

  // Pass 1 (floating): rms of r64 over its finite elements and eager's error, hence the threshold.
  double sumsq = 0, finite_count = 0, eager_max = 0;
  if (floating) {
    for (int64_t off = 0; off < n; off += chunk) {
      torch::Tensor r = flat64(slice(ref, off), device), e = flat64(slice(eag, off), device);
      // Short path: with every value finite, the sum of squares and eager's largest error come
      // out finite, and they are all this pass needs.
      torch::Tensor quick = torch::stack({torch::dot(r, r), (e - r).abs_().max()}).cpu();
      const double* q = quick.data_ptr<double>();
      if (std::isfinite(q[0]) && std::isfinite(q[1])) {
        sumsq += q[0];
        finite_count += static_cast<double>(r.numel());
        eager_max = std::max(eager_max, q[1]);
        continue;
      }
      torch::Tensor finite_r = torch::isfinite(r);
      torch::Tensor eager_err = abs_error(e, r);
      // eager's overflow to ±inf must not make every answer acceptable.
      torch::Tensor finite_part =
          r.masked_fill(finite_r.logical_not(), 0.0);  // the same dot as the short path
      torch::Tensor part =
          torch::stack({torch::dot(finite_part, finite_part), finite_r.sum().to(torch::kFloat64),
                        eager_err.masked_fill(torch::isinf(eager_err), 0.0).max()})
              .cpu();
      sumsq += part[0].item<double>();
      finite_count += part[1].item<double>();
      eager_max = std::max(eager_max, part[2].item<double>());
    }
  }
  if (floating && std::isinf(sumsq)) {
    // Squares beyond float64's range (|r| above ~1e154): again, scaled by the largest finite |r|,
    // or the threshold would be infinite and accept anything.
    double scale = 0, scaled = 0;
    for (int64_t off = 0; off < n; off += chunk) {
      torch::Tensor r = flat64(slice(ref, off), device);
      scale = std::max(
          scale, r.abs().masked_fill(torch::isfinite(r).logical_not(), 0.0).max().item<double>());
    }
    for (int64_t off = 0; off < n; off += chunk) {
      torch::Tensor r = flat64(slice(ref, off), device);
      torch::Tensor part = (r / scale).masked_fill(torch::isfinite(r).logical_not(), 0.0);
      scaled += torch::dot(part, part).item<double>();
    }
    out.rms_reference = scale * std::sqrt(scaled / std::max(finite_count, 1.0));
  } else {
    out.rms_reference = std::sqrt(sumsq / std::max(finite_count, 1.0));
  }
  out.eager_max_abs_error = eager_max;
  out.threshold = floating ? std::max(out.rms_reference * tol, eager_max * k) : 0.0;

  // Pass 2: the candidate's errors against the threshold; one device-to-host copy per chunk (two
  // where the short path does not settle it).
  for (int64_t off = 0; off < n; off += chunk) {
    torch::Tensor cc = slice(cand, off), rc = slice(ref, off);
    int64_t len = cc.numel();
    torch::Tensor c = flat64(cc, device), r = flat64(rc, device);
    if (floating) {
      // Short path: a finite largest error means no NaN or infinity on either side (NaN − x is
      // NaN, ±inf − x is infinite, equal infinities give NaN); if nothing exceeds the threshold
      // either, the chunk needs no first-bad search.
      torch::Tensor err = (c - r).abs_();
      torch::Tensor rel = err / r.abs().clamp_min_(std::numeric_limits<double>::min());
      torch::Tensor quick =
          torch::stack({err.max(), rel.max(), (err > out.threshold).sum().to(torch::kFloat64)})
              .cpu();
      const double* q = quick.data_ptr<double>();
      if (std::isfinite(q[0]) && q[2] == 0) {
        out.max_abs_error = std::max(out.max_abs_error, q[0]);
        out.max_rel_error = std::max(out.max_rel_error, q[1]);
        continue;
      }
    }
    torch::Tensor err = abs_error(c, r);
    torch::Tensor bad = floating ? err > out.threshold : bits(cc).to(device) != bits(rc).to(device);
    torch::Tensor both_finite = torch::isfinite(c).logical_and(torch::isfinite(r));
    torch::Tensor rel = (c - r).abs() / r.abs().clamp_min(std::numeric_limits<double>::min());
    torch::Tensor nans = torch::isnan(c).logical_and(torch::isnan(r).logical_not()).sum();
    torch::Tensor first = torch::arange(len, r.options().dtype(torch::kLong))
                              .masked_fill(bad.logical_not(), len)
                              .min();
    torch::Tensor at = first.clamp_max(len - 1).view({1});
    torch::Tensor stats =
        torch::cat(
            {err.max().view({1}), rel.masked_fill(both_finite.logical_not(), 0.0).max().view({1}),
             bad.sum().to(torch::kFloat64).view({1}), nans.to(torch::kFloat64).view({1}),
             first.to(torch::kFloat64).view({1}), c.index_select(0, at), r.index_select(0, at)})
            .cpu();
    const double* st = stats.data_ptr<double>();
    out.max_abs_error = std::max(out.max_abs_error, st[0]);
    out.max_rel_error = std::max(out.max_rel_error, st[1]);
    if (st[2] > 0 && out.mismatches == 0) {
      out.first_bad_index = off + static_cast<int64_t>(st[4]);
      out.first_bad_value = st[5];
      out.first_bad_expected = st[6];
    }
    out.mismatches += static_cast<int64_t>(st[2]);
    out.nan_count += static_cast<int64_t>(st[3]);
  }
  out.normalized_error =
      out.rms_reference > 0 ? out.max_abs_error / out.rms_reference : out.max_abs_error;
  out.ok = out.mismatches == 0;
  if (out.ok)
    out.first_bad_index = -1;
  else
    out.first_bad_position = unravel(out.first_bad_index, candidate.sizes().vec());
  return out;
}

nlohmann::json Comparison::to_json() const {
  return {{"ok", ok},
          {"problem", problem},
          {"dtype", std::string(tasks::dtype_name(dtype))},
          {"numel", numel},
          {"mismatches", mismatches},
          {"max_abs_error", number(max_abs_error)},
          {"max_rel_error", number(max_rel_error)},
          {"normalized_error", number(normalized_error)},
          {"threshold", number(threshold)},
          {"tolerance", number(tolerance)},
          {"eager_factor", number(eager_factor)},
          {"rms_reference", number(rms_reference)},
          {"eager_max_abs_error", number(eager_max_abs_error)},
          {"first_bad_index", first_bad_index},
          {"first_bad_position", first_bad_position},
          {"first_bad_value", number(first_bad_value)},
          {"first_bad_expected", number(first_bad_expected)},
          {"nan_count", nan_count}};
}

std::string Comparison::summary() const {
  if (!problem.empty()) return problem;
  if (numel == 0) return "no elements to compare";
  const bool exact = !tasks::is_floating(dtype);
  std::string s;
  if (exact) {
    s = printf_string("exact match required; %lld of %lld elements differ", (long long)mismatches,
                      (long long)numel);
  } else {
    s = printf_string(
        "max abs error %.1e %s threshold %.1e (tol %.0e x rms %.2g; eager error %.1e x %g)",
        max_abs_error, ok ? "<=" : ">", threshold, tolerance, rms_reference, eager_max_abs_error,
        eager_factor);
    s += printf_string("; %lld of %lld elements wrong", (long long)mismatches, (long long)numel);
    if (nan_count > 0) s += printf_string(" (%lld NaN)", (long long)nan_count);
  }
  if (first_bad_index >= 0)
    s += ", first at " + format_shape(first_bad_position) +
         printf_string(exact ? ": %.17g vs %.17g" : ": %.6g vs %.6g", first_bad_value,
                       first_bad_expected);
  return s;
}

double max_abs_difference(const torch::Tensor& a, const torch::Tensor& b) {
  torch::Tensor x = a.reshape(-1), y = b.reshape(-1);
  const int64_t n = x.numel();
  if (n == 0) return 0;
  // Fast path for floating outputs (every timed repetition checks one): |x − y| in float32 (float64
  // for float64), two kernels a chunk (the difference, its infinity norm) and one synchronisation.
  // A NaN or an infinity anywhere sends it to the exact rules below.
  if (x.is_floating_point() && y.is_floating_point()) {
    auto wide = x.scalar_type() == torch::kFloat64 || y.scalar_type() == torch::kFloat64
                    ? torch::kFloat64
                    : torch::kFloat32;
    std::vector<torch::Tensor> maxima;
    for (int64_t off = 0; off < n; off += kCompareChunk) {
      int64_t end = std::min(off + kCompareChunk, n);
      // The infinity norm of the difference: |·| and max in one pass over it.
      maxima.push_back(torch::linalg_vector_norm(
          x.slice(0, off, end).to(wide) - y.slice(0, off, end).to(x.device(), wide), kInf));
    }
    double fast = torch::stack(maxima).max().item<double>();
    if (std::isfinite(fast)) return fast;
  }
  double worst = 0;
  for (int64_t off = 0; off < n; off += kCompareChunk) {
    int64_t end = std::min(off + kCompareChunk, n);
    worst = std::max(worst, abs_error(flat64(x.slice(0, off, end), x.device()),
                                      flat64(y.slice(0, off, end), x.device()))
                                .max()
                                .item<double>());
  }
  return worst;
}

bool bitwise_equal(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || !a.sizes().equals(b.sizes())) return false;
  return a.numel() == 0 || torch::equal(bits(a), bits(b).to(a.device()));
}

// Bitwise comparisons need the same dtype and shape: else an Error naming both, from `who`.
static void require_same_layout(const torch::Tensor& a, const torch::Tensor& b, const char* who) {
  if (a.scalar_type() != b.scalar_type() || !a.sizes().equals(b.sizes()))
    throw Error(std::string(who) + ": " + type_name(a.scalar_type()) + " " +
                format_shape(a.sizes().vec()) + " against " + type_name(b.scalar_type()) + " " +
                format_shape(b.sizes().vec()));
}

int64_t bitwise_differences(const torch::Tensor& a, const torch::Tensor& b) {
  require_same_layout(a, b, "bitwise_differences");
  if (a.numel() == 0) return 0;
  return (bits(a) != bits(b).to(a.device())).sum().item<int64_t>();
}

void poison(torch::Tensor& t, Poison kind, uint64_t seed) {
  const bool floating = c10::isFloatingType(t.scalar_type());
  if (kind == Poison::NaN) {
    if (floating) {
      t.fill_(std::numeric_limits<double>::quiet_NaN());
      return;
    }
    torch::Tensor b = bits(t);
    switch (t.element_size()) {
      case 1:
        b.fill_(0xA5);
        break;
      case 2:
        b.fill_(static_cast<int16_t>(0xA5A5u));
        break;
      case 4:
        b.fill_(static_cast<int32_t>(0xA5A5A5A5u));
        break;
      default:
        b.fill_(as_signed(0xA5A5A5A5A5A5A5A5ull));
        break;
    }
    return;
  }
  if (t.numel() == 0) return;
  if (!t.is_contiguous()) {  // rare: poison a contiguous copy, then write it back
    torch::Tensor c = t.contiguous();
    poison(c, kind, seed);
    t.copy_(c);
    return;
  }
  // In chunks of the flat view (element i gets splitmix64's output i wherever the chunk starts).
  torch::Tensor flat = t.view(-1);
  const int64_t n = flat.numel();
  for (int64_t off = 0; off < n; off += kCompareChunk) {
    torch::Tensor part = flat.slice(0, off, std::min(off + kCompareChunk, n));
    torch::Tensor h = splitmix64(part.numel(), seed, t.options(), off);
    if (floating) {
      // The top 53 bits as a uniform draw u in [0, 1), the lowest bit as the sign: ±10^(6u − 3),
      // magnitudes log-uniform in [1e-3, 1e3] (normal and finite in every float dtype, and many
      // distinct values even in bfloat16).
      torch::Tensor unit =
          shift_right_logical(h, 11).to(torch::kFloat64) * (1.0 / 9007199254740992.0);
      torch::Tensor magnitude = ((unit * 6 - 3) * std::log(10.0)).exp().clamp(1e-3, 1e3);
      torch::Tensor sign = 1 - 2 * torch::bitwise_and(h, 1).to(torch::kFloat64);
      part.copy_(sign * magnitude);
    } else if (t.scalar_type() == torch::kBool) {
      part.view(torch::kByte).copy_(torch::bitwise_or(torch::bitwise_and(h, 0x7F), 0x80));
    } else {
      bits(part).copy_(h);  // narrower integers keep the low bits
    }
  }
}

int64_t untouched_count(const torch::Tensor& first, const torch::Tensor& first_poison,
                        const torch::Tensor& second, const torch::Tensor& second_poison) {
  require_same_layout(first, first_poison, "untouched_count");
  require_same_layout(second, second_poison, "untouched_count");
  require_same_layout(first, second, "untouched_count");
  if (second.numel() == 0) return 0;
  torch::Tensor kept_first = bits(first) == bits(first_poison).to(first.device());
  torch::Tensor kept_second = bits(second) == bits(second_poison).to(second.device());
  return (kept_first & kept_second.to(first.device())).sum().item<int64_t>();
}

void fill_canary(torch::Tensor& bytes, uint64_t seed) {
  require_bytes(bytes, "fill_canary");
  if (bytes.numel() > 0) bytes.copy_(canary_pattern(bytes, seed));
}

CanaryCheck check_canary(const torch::Tensor& bytes, uint64_t seed) {
  require_bytes(bytes, "check_canary");
  const int64_t n = bytes.numel();
  if (n == 0) return {};
  torch::Tensor changed = (bytes != canary_pattern(bytes, seed)).reshape(-1);
  torch::Tensor first = torch::arange(n, bytes.options().dtype(torch::kLong))
                            .masked_fill(changed.logical_not(), n)
                            .min();
  torch::Tensor stats = torch::stack({changed.sum(), first}).cpu();
  const int64_t* s = stats.data_ptr<int64_t>();
  CanaryCheck check;
  check.overwritten = s[0];
  if (check.overwritten > 0) check.first_offset = s[1];
  return check;
}

}  // namespace kforge::verify
