// Compiled with -ffp-contract=off (see tasks/CMakeLists.txt): bit-identity with the GPU.
#include "kforge/tasks/generator.h"

#include <ATen/Parallel.h>

#include <cmath>

#include "kforge/tasks/philox.h"
#include "kforge/tasks/transform.h"

namespace kforge::tasks {

ResolvedInit resolve_init(const InputSpec& in, const Dims& dims, int variant) {
  ResolvedInit r;
  r.kind = static_cast<int>(in.init.kind);
  const auto& p = in.init.params;
  switch (in.init.kind) {
    case InitKind::Normal:
    case InitKind::Uniform:
      r.p0 = p[0].eval_real(dims);
      r.p1 = p[1].eval_real(dims);
      break;
    case InitKind::Randint:
      r.lo = p[0].eval_int(dims);
      r.hi = p[1].eval_int(dims);
      break;
    case InitKind::Bernoulli:
      r.p0 = p[0].eval_real(dims);
      break;
    case InitKind::Rand:
      r.p0 = 0.5;  // bool inputs drawn with "rand"
      break;
    case InitKind::Randn:
      break;
  }
  if (variant == 0 || in.init.range_shift == 0) return r;
  // Scaled by a power of two, exact in double: randn and rand become the normal and uniform
  // distributions they are, with their parameters scaled.
  const double scale = std::ldexp(1.0, in.init.range_shift);
  switch (in.init.kind) {
    case InitKind::Randn:
      r.kind = static_cast<int>(InitKind::Normal);
      r.p0 = 0.0;
      r.p1 = scale;
      break;
    case InitKind::Rand:
      r.kind = static_cast<int>(InitKind::Uniform);
      r.p0 = 0.0;
      r.p1 = scale;
      break;
    case InitKind::Normal:
    case InitKind::Uniform:
      r.p0 *= scale;
      r.p1 *= scale;
      break;
    case InitKind::Randint:
    case InitKind::Bernoulli:
      break;  // parse_init refuses a shift on these
  }
  return r;
}

torch::ScalarType to_scalar_type(Dtype d) {
  switch (d) {
    case Dtype::Float32:
      return torch::kFloat32;
    case Dtype::Float16:
      return torch::kFloat16;
    case Dtype::BFloat16:
      return torch::kBFloat16;
    case Dtype::Float64:
      return torch::kFloat64;
    case Dtype::Int32:
      return torch::kInt32;
    case Dtype::Int64:
      return torch::kInt64;
    case Dtype::Bool:
      return torch::kBool;
  }
  throw Error("unknown dtype");
}

std::optional<Dtype> from_scalar_type(torch::ScalarType t) {
  for (Dtype d : {Dtype::Float32, Dtype::Float16, Dtype::BFloat16, Dtype::Float64, Dtype::Int32,
                  Dtype::Int64, Dtype::Bool})
    if (to_scalar_type(d) == t) return d;
  return std::nullopt;
}

namespace {

template <typename T, typename F>
void fill(torch::Tensor& t, F value_of) {
  T* data = t.data_ptr<T>();
  at::parallel_for(0, t.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) data[i] = value_of(static_cast<unsigned long long>(i));
  });
}

// One draw of `spec` (an input, or one of its draws) in `dtype` on the CPU, from `stream`;
// float16/bfloat16 values are rounded from float32 unless `keep_float32` (a transform's operand).
torch::Tensor draw_cpu(const InputSpec& spec, Dtype dtype, const std::vector<int64_t>& shape,
                       const Dims& dims, uint64_t seed, unsigned int stream, int variant,
                       bool keep_float32) {
  ResolvedInit r = resolve_init(spec, dims, variant);
  const unsigned int k = stream;
  auto opts = torch::TensorOptions().device(torch::kCPU);
  switch (dtype) {
    case Dtype::Float64: {
      torch::Tensor t = torch::empty(shape, opts.dtype(torch::kFloat64));
      fill<double>(t, [&](auto i) {
        return kforge_gen::sample_real(r.kind, variant, r.p0, r.p1, seed, k, i);
      });
      return t;
    }
    case Dtype::Float32:
    case Dtype::Float16:
    case Dtype::BFloat16: {
      // Drawn in double, rounded to float32, then (fp16/bf16) rounded to nearest-even: the GPU
      // generator does the same steps.
      torch::Tensor t = torch::empty(shape, opts.dtype(torch::kFloat32));
      fill<float>(t, [&](auto i) {
        return static_cast<float>(kforge_gen::sample_real(r.kind, variant, r.p0, r.p1, seed, k, i));
      });
      return dtype == Dtype::Float32 || keep_float32 ? t : t.to(to_scalar_type(dtype));
    }
    case Dtype::Int64: {
      torch::Tensor t = torch::empty(shape, opts.dtype(torch::kInt64));
      fill<int64_t>(
          t, [&](auto i) { return kforge_gen::sample_int(variant, r.lo, r.hi, seed, k, i); });
      return t;
    }
    case Dtype::Int32: {
      torch::Tensor t = torch::empty(shape, opts.dtype(torch::kInt32));
      fill<int32_t>(t, [&](auto i) {
        return static_cast<int32_t>(kforge_gen::sample_int(variant, r.lo, r.hi, seed, k, i));
      });
      return t;
    }
    case Dtype::Bool: {
      torch::Tensor t = torch::empty(shape, opts.dtype(torch::kBool));
      fill<bool>(t, [&](auto i) { return kforge_gen::sample_bool(variant, r.p0, seed, k, i); });
      return t;
    }
  }
  throw Error("unknown dtype");
}

}  // namespace

torch::Tensor generate_cpu(const Task& task, size_t index, const Dims& dims, uint64_t seed,
                           int variant) {
  const InputSpec& in = task.inputs.at(index);
  std::vector<int64_t> shape = task.shape_of(in, dims);
  if (in.transform.empty())
    return draw_cpu(in, in.dtype, shape, dims, seed, draw_stream(index, 0), variant, false);
  std::vector<torch::Tensor> drawn{
      draw_cpu(in, in.drawn_dtype(), shape, dims, seed, draw_stream(index, 0), variant, true)};
  for (size_t j = 0; j < in.draws.size(); ++j) {
    const InputSpec& d = in.draws[j];
    drawn.push_back(draw_cpu(d, d.dtype, task.shape_of(d, dims), dims, seed,
                             draw_stream(index, j + 1), variant, true));
  }
  return apply_transform(task, index, drawn);
}

}  // namespace kforge::tasks
