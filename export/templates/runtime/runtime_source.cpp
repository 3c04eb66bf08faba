// KFORGE_NS's runtime, written by `kforge export` (see runtime.h).
#include "KFORGE_NS_runtime.h"

#include <map>
#include <mutex>
#include <utility>

namespace KFORGE_NS::detail {

namespace {

std::string driver_words(CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  return std::string(name ? name : "CUDA error " + std::to_string(static_cast<int>(r))) + " (" +
         (text ? text : "") + ")";
}

int attribute(CUdevice dev, CUdevice_attribute a, const char* op) {
  int v = 0;
  check(cuDeviceGetAttribute(&v, a, dev), op, "reading the GPU's attributes");
  return v;
}

}  // namespace

void check(CUresult r, const char* op, const std::string& what) {
  if (r != CUDA_SUCCESS) throw Error(std::string(op) + ": " + what + ": " + driver_words(r));
}

int64_t op_int(kforge_launch::IntOp o, int64_t a, int64_t b, const char* op, const char* expr) {
  int64_t r = 0;
  kforge_launch::IntError e = kforge_launch::apply(o, a, b, &r);
  if (e != kforge_launch::IntError::None)
    throw Error(std::string(op) + ": " + kforge_launch::describe(e) + " in \"" + expr +
                "\" at these sizes");
  return r;
}

void check_aligned(const void* p, size_t bytes, const char* op, const char* tensor) {
  if (reinterpret_cast<uintptr_t>(p) % bytes != 0)
    throw Error(std::string(op) + ": " + tensor + " must start at a multiple of " +
                std::to_string(bytes) + " bytes (the kernel was judged on aligned buffers)");
}

const Loaded& load(const OpImages& op) {
  CUcontext ctx = nullptr;
  if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr)
    throw Error(std::string(op.op) +
                ": no current CUDA context; make one current first (the CUDA runtime does on its "
                "first call, "
                "e.g. cudaSetDevice then cudaFree(0); PyTorch does for CUDA tensors)");
  static std::mutex mutex;
  static std::map<std::pair<CUcontext, const OpImages*>, Loaded> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find({ctx, &op});
  if (it != cache.end()) return it->second;

  CUdevice dev = 0;
  check(cuCtxGetDevice(&dev), op.op, "finding the current GPU");
  int sm = attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, op.op) * 10 +
           attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, op.op);
  Loaded m;
  m.limits.max_grid[0] = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, op.op);
  m.limits.max_grid[1] = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, op.op);
  m.limits.max_grid[2] = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, op.op);
  m.limits.max_block[0] = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, op.op);
  m.limits.max_block[1] = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, op.op);
  m.limits.max_block[2] = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, op.op);
  m.limits.max_threads_per_block = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, op.op);
  m.limits.max_shared_per_block =
      attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, op.op);
  m.num_sms = attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, op.op);
  m.warp_size = attribute(dev, CU_DEVICE_ATTRIBUTE_WARP_SIZE, op.op);
  m.max_shared_per_block = m.limits.max_shared_per_block;

  // The GPU's own cubin first; then PTX for it or an older architecture, the newest first.
  std::vector<const Image*> order;
  for (const Image& i : op.images)
    if (!i.ptx && i.sm == sm) order.push_back(&i);
  for (int want = sm; want >= 0; --want)
    for (const Image& i : op.images)
      if (i.ptx && i.sm == want) order.push_back(&i);
  std::string tried;
  for (const Image* i : order) {
    CUresult r = cuModuleLoadData(&m.module, i->data);
    if (r == CUDA_SUCCESS) {
      m.image = std::string(i->ptx ? "ptx " : "cubin ") + i->arch;
      break;
    }
    tried += std::string(tried.empty() ? "" : "; ") + i->arch + ": " + driver_words(r);
    m.module = nullptr;
  }
  if (!m.module) {
    std::string held;
    for (const Image& i : op.images)
      held += std::string(held.empty() ? "" : ", ") + (i.ptx ? "ptx " : "cubin ") + i.arch;
    throw Error(std::string(op.op) + ": no kernel image loads on this GPU (sm_" +
                std::to_string(sm) + "); the library holds " + held +
                (tried.empty() ? "" : " (" + tried + ")") +
                ": export again with --arch for this GPU");
  }
  for (const char* k : op.kernels) {
    CUfunction f = nullptr;
    check(cuModuleGetFunction(&f, m.module, k), op.op, std::string("finding kernel ") + k);
    m.functions.push_back(f);
  }
  return cache.emplace(std::make_pair(ctx, &op), std::move(m)).first->second;
}

}  // namespace KFORGE_NS::detail
