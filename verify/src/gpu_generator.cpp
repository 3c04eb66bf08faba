#include "kforge/verify/gpu_generator.h"

#include <torch/cuda.h>
#include <torch/version.h>

#include <map>
#include <mutex>

#include "kforge/compile/nvrtc.h"
#include "kforge/tasks/transform.h"
#include "kforge/verify/driver.h"
#include "tasks_philox.h"

namespace kforge::verify {
namespace {

constexpr const char* kKernels = R"(
#define KFORGE_GRID_STRIDE(n) \
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < (n); \
       i += (unsigned long long)gridDim.x * blockDim.x)

extern "C" __global__ void kforge_fill_f64(double* out, unsigned long long n, int kind, int variant,
                                           double p0, double p1, unsigned long long seed, unsigned int input) {
  KFORGE_GRID_STRIDE(n) out[i] = kforge_gen::sample_real(kind, variant, p0, p1, seed, input, i);
}
extern "C" __global__ void kforge_fill_f32(float* out, unsigned long long n, int kind, int variant,
                                           double p0, double p1, unsigned long long seed, unsigned int input) {
  KFORGE_GRID_STRIDE(n) out[i] = (float)kforge_gen::sample_real(kind, variant, p0, p1, seed, input, i);
}
extern "C" __global__ void kforge_fill_i64(long long* out, unsigned long long n, int variant, long long lo,
                                           long long hi, unsigned long long seed, unsigned int input) {
  KFORGE_GRID_STRIDE(n) out[i] = kforge_gen::sample_int(variant, lo, hi, seed, input, i);
}
extern "C" __global__ void kforge_fill_i32(int* out, unsigned long long n, int variant, long long lo,
                                           long long hi, unsigned long long seed, unsigned int input) {
  KFORGE_GRID_STRIDE(n) out[i] = (int)kforge_gen::sample_int(variant, lo, hi, seed, input, i);
}
extern "C" __global__ void kforge_fill_bool(unsigned char* out, unsigned long long n, int variant, double p,
                                            unsigned long long seed, unsigned int input) {
  KFORGE_GRID_STRIDE(n) out[i] = kforge_gen::sample_bool(variant, p, seed, input, i) ? 1 : 0;
}
)";

struct Module {
  CUmodule module = nullptr;
  int sm_count = 0;
  CUfunction f64 = nullptr, f32 = nullptr, i64 = nullptr, i32 = nullptr, boolean = nullptr;
};

// One module per device for the life of the process (never unloaded: the driver may be torn down
// before static destructors run).
const Module& module_for(int device_index) {
  static std::mutex mutex;
  static std::map<int, Module> modules;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = modules.find(device_index); it != modules.end()) return it->second;

  const Driver& d = Driver::get();
  DeviceInfo info = list_devices().at(device_index);
  std::string source = std::string(embedded::tasks_philox_philox) + kKernels;
  compile::NvrtcOutput out = compile::nvrtc_compile(source, "kforge_generator.cu",
                                                    compile::arch_for(info.cc_major, info.cc_minor),
                                                    {"--fmad=false", "-std=c++17"});
  if (!out.ok) throw Error("the GPU input generator does not compile (a kforge bug):\n" + out.log);
  CUdevice dev;
  KFORGE_CU_CHECK(d, d.cuDeviceGet(&dev, device_index));
  CUcontext ctx;
  KFORGE_CU_CHECK(
      d, d.cuDevicePrimaryCtxRetain(&ctx, dev));  // shared with LibTorch; kept for the process
  KFORGE_CU_CHECK(d, d.cuCtxSetCurrent(ctx));
  Module m;
  m.sm_count = info.sm_count;
  KFORGE_CU_CHECK(d, d.cuModuleLoadData(&m.module, out.cubin.data()));
  KFORGE_CU_CHECK(d, d.cuModuleGetFunction(&m.f64, m.module, "kforge_fill_f64"));
  KFORGE_CU_CHECK(d, d.cuModuleGetFunction(&m.f32, m.module, "kforge_fill_f32"));
  KFORGE_CU_CHECK(d, d.cuModuleGetFunction(&m.i64, m.module, "kforge_fill_i64"));
  KFORGE_CU_CHECK(d, d.cuModuleGetFunction(&m.i32, m.module, "kforge_fill_i32"));
  KFORGE_CU_CHECK(d, d.cuModuleGetFunction(&m.boolean, m.module, "kforge_fill_bool"));
  return modules.emplace(device_index, m).first->second;
}

}  // namespace

namespace {

// One draw of `spec` (an input, or one of its draws) in `dtype` on the GPU, from `stream`;
// float16/bfloat16 values are rounded from float32 unless `keep_float32` (a transform's operand).
torch::Tensor draw_cuda(const tasks::InputSpec& spec, tasks::Dtype dtype,
                        const std::vector<int64_t>& shape, const tasks::Dims& dims, uint64_t seed,
                        unsigned int stream, int variant, int device_index, bool keep_float32) {
  const Driver& d = Driver::get();
  using tasks::Dtype;
  tasks::ResolvedInit r = tasks::resolve_init(spec, dims, variant);
  Dtype gen_dtype = (dtype == Dtype::Float16 || dtype == Dtype::BFloat16) ? Dtype::Float32 : dtype;
  torch::Tensor out = torch::empty(shape, torch::TensorOptions()
                                              .dtype(tasks::to_scalar_type(gen_dtype))
                                              .device(torch::Device(torch::kCUDA, device_index)));
  const Module& m = module_for(device_index);
  CUdevice dev;
  KFORGE_CU_CHECK(d, d.cuDeviceGet(&dev, device_index));
  CUcontext ctx;
  KFORGE_CU_CHECK(d, d.cuDevicePrimaryCtxRetain(&ctx, dev));
  KFORGE_CU_CHECK(d, d.cuCtxSetCurrent(ctx));

  void* ptr = out.data_ptr();
  unsigned long long n = static_cast<unsigned long long>(out.numel());
  unsigned int input = stream;
  long long lo = r.lo, hi = r.hi;
  std::vector<void*> args;
  CUfunction fn = nullptr;
  switch (gen_dtype) {
    case Dtype::Float64:
    case Dtype::Float32:
      fn = gen_dtype == Dtype::Float64 ? m.f64 : m.f32;
      args = {&ptr, &n, &r.kind, &variant, &r.p0, &r.p1, &seed, &input};
      break;
    case Dtype::Int64:
    case Dtype::Int32:
      fn = gen_dtype == Dtype::Int64 ? m.i64 : m.i32;
      args = {&ptr, &n, &variant, &lo, &hi, &seed, &input};
      break;
    case Dtype::Bool:
      fn = m.boolean;
      args = {&ptr, &n, &variant, &r.p0, &seed, &input};
      break;
    default:
      throw Error("unreachable dtype in generate_cuda");
  }
  if (n > 0) {
    unsigned long long blocks = std::min<unsigned long long>((n + 255) / 256, 32ull * m.sm_count);
    KFORGE_CU_CHECK(d, d.cuLaunchKernel(fn, static_cast<unsigned>(blocks), 1, 1, 256, 1, 1, 0,
                                        nullptr, args.data(), nullptr));
    KFORGE_CU_CHECK(d, d.cuCtxSynchronize());
  }
  KFORGE_CU_CHECK(d, d.cuDevicePrimaryCtxRelease(dev));
  return gen_dtype == dtype || keep_float32 ? out : out.to(tasks::to_scalar_type(dtype));
}

}  // namespace

torch::Tensor generate_cuda(const tasks::Task& task, size_t index, const tasks::Dims& dims,
                            uint64_t seed, int variant, int device_index) {
  const Driver& d = Driver::get();
  d.require("generating inputs on the GPU");
  if (!torch::cuda::is_available())
    throw Error(
        "generating inputs on the GPU needs a LibTorch built with CUDA; this one (" TORCH_VERSION
        ") has none");
  const tasks::InputSpec& in = task.inputs.at(index);
  std::vector<int64_t> shape = task.shape_of(in, dims);
  if (in.transform.empty())
    return draw_cuda(in, in.dtype, shape, dims, seed, tasks::draw_stream(index, 0), variant,
                     device_index, false);
  // A computed input: its draws, then its transform on the GPU (docs/task-format.md).
  std::vector<torch::Tensor> drawn{draw_cuda(in, in.drawn_dtype(), shape, dims, seed,
                                             tasks::draw_stream(index, 0), variant, device_index,
                                             true)};
  for (size_t j = 0; j < in.draws.size(); ++j) {
    const tasks::InputSpec& e = in.draws[j];
    drawn.push_back(draw_cuda(e, e.dtype, task.shape_of(e, dims), dims, seed,
                              tasks::draw_stream(index, j + 1), variant, device_index, true));
  }
  torch::Tensor t = tasks::apply_transform(task, index, drawn);
  // LibTorch ran the transform on its current stream; what reads the input next may not.
  torch::cuda::synchronize(device_index);
  return t;
}

tasks::InputGenerator cuda_generator(int device_index) {
  return [device_index](const tasks::Task& t, size_t index, const tasks::Dims& d, uint64_t seed,
                        int variant) {
    return generate_cuda(t, index, d, seed, variant, device_index);
  };
}

}  // namespace kforge::verify
