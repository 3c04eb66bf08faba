// The GPU part of memory.h: free memory as the driver sees it, and LibTorch's cache given back.
#include <c10/util/Exception.h>
#include <torch/types.h>
#ifdef KFORGE_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <cstdlib>

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
#ifdef KFORGE_TORCH_CUDA
  try {
    // Index 0 is StatType::AGGREGATE (both pools) in every LibTorch kforge builds against.
    const auto stats =
        c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    m.torch_allocated = static_cast<uint64_t>(stats.allocated_bytes[0].current);
    m.torch_reserved = static_cast<uint64_t>(stats.reserved_bytes[0].current);
  } catch (const std::exception&) {
    // The allocator has not been started on this device: LibTorch holds nothing there.
  }
#endif
  return m;
}

bool release_torch_cache(int /*device*/) {
#ifdef KFORGE_TORCH_CUDA
  // Every unused cached block, on every device, back to the driver. (kforge once asked for an
  // allocation too large to satisfy, which made the allocator free its cache before failing; with
  // LibTorch 2.11 on an H100 that left 32 GiB cached.) A segment with one live block in it stays.
  c10::cuda::CUDACachingAllocator::emptyCache();
  return true;
#else
  return false;
#endif
}

void keep_large_cached_blocks_whole() {
  if (!std::getenv("PYTORCH_CUDA_ALLOC_CONF") && !std::getenv("PYTORCH_ALLOC_CONF"))
    ::setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:512", 0);
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
