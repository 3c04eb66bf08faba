// The GPU part of memory.h: free memory as the driver sees it, and LibTorch's cache given back.
#include <c10/util/Exception.h>
#include <torch/types.h>

#include "kforge/verify/driver.h"
#include "kforge/verify/memory.h"

namespace kforge::verify {

DeviceMemory device_memory(int device) {
  const Driver& d = Driver::get();
  d.require("reading the GPU's free memory");
  CUdevice dev;
  KFORGE_CU_CHECK(d, d.cuDeviceGet(&dev, device));
  CUcontext ctx;
  KFORGE_CU_CHECK(d, d.cuDevicePrimaryCtxRetain(&ctx, dev));  // the judge's and LibTorch's context
  DeviceMemory m;
  CUresult r = d.cuCtxSetCurrent(ctx);
  size_t free = 0, total = 0;
  if (r == CUDA_SUCCESS) r = d.cuMemGetInfo(&free, &total);
  d.cuDevicePrimaryCtxRelease(dev);
  KFORGE_CU_CHECK(d, r);
  m.free = free;
  m.total = total;
  return m;
}

void release_torch_cache(int device) {
  uint64_t total = device_memory(device).total;
  try {
    // Never satisfiable: LibTorch frees every cached block it can, retries, then throws.
    torch::Tensor t =
        torch::empty({static_cast<int64_t>(2 * total + (uint64_t{1} << 30))},
                     torch::TensorOptions()
                         .dtype(torch::kUInt8)
                         .device(torch::kCUDA, static_cast<c10::DeviceIndex>(device)));
  } catch (const c10::Error&) {
  }
}

bool is_out_of_memory(const std::exception& e) {
  if (const auto* cuda = dynamic_cast<const CudaError*>(&e))
    return cuda->code() == CUDA_ERROR_OUT_OF_MEMORY;
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  std::string what = e.what();
  return what.find("CUDA out of memory") != std::string::npos ||
         what.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos;
}

}  // namespace kforge::verify
