#include "kforge/verify/shared_buffer.h"

#include <ATen/ops/from_blob.h>

#include "kforge/verify/driver.h"
#include "kforge/verify/memory.h"

namespace kforge::verify {
namespace {

uint64_t round_up(uint64_t v, uint64_t m) {
  return (v + m - 1) / m * m;
}

// A tensor over VMM memory. The device is given, not asked: LibTorch 2.11's from_blob asks
// cudaPointerGetAttributes, which calls driver-mapped VMM memory "host memory" (seen on the H200).
torch::Tensor view_of(unsigned long long address, std::vector<int64_t> shape,
                      torch::ScalarType dtype, int device) {
  torch::Device where(torch::kCUDA, static_cast<c10::DeviceIndex>(device));
  return at::for_blob(reinterpret_cast<void*>(address), shape)
      .options(torch::TensorOptions().dtype(dtype).device(where))
      .target_device(where)
      .make_tensor();
}

}  // namespace

uint64_t allocation_granularity(int device) {
  const Driver& d = Driver::get();
  d.require("sharing buffers with a runner");
  CUmemAllocationProp prop = shareable_allocation(device);
  size_t g = 0;
  KFORGE_CU_CHECK(d, d.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  return g;
}

BufferSpec buffer_layout(uint64_t bytes, uint64_t granularity) {
  BufferSpec b;
  uint64_t padded = round_up(std::max<uint64_t>(bytes, 1), 256);
  b.bytes = bytes;
  // At least 256 slack bytes before the tensor, so an underflow has canaries to hit.
  b.allocation_bytes = round_up(padded + 256, granularity);
  b.offset = b.allocation_bytes - padded;
  return b;
}

SharedBuffer::SharedBuffer(std::string name, const std::vector<int64_t>& shape,
                           torch::ScalarType dtype, bool read_only, int device)
    : device_(device) {
  const Driver& d = Driver::get();
  uint64_t gran = allocation_granularity(device);
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  uint64_t bytes = static_cast<uint64_t>(numel) * c10::elementSize(dtype);
  spec_ = buffer_layout(bytes, gran);
  spec_.name = std::move(name);
  spec_.read_only = read_only;

  CUmemAllocationProp prop = shareable_allocation(device);
  CUmemGenericAllocationHandle h;
  CUresult created = d.cuMemCreate(&h, spec_.allocation_bytes, &prop, 0);
  if (created == CUDA_ERROR_OUT_OF_MEMORY) {
    // LibTorch may hold the memory in its cache (what earlier verifications freed): given back,
    // then tried once more.
    d.cuCtxSynchronize();
    release_torch_cache(device);
    created = d.cuMemCreate(&h, spec_.allocation_bytes, &prop, 0);
  }
  d.check(created, ("cuMemCreate(" + std::to_string(spec_.allocation_bytes) + " bytes)").c_str(),
          __FILE__, __LINE__);
  handle_ = h;
  try {
    int fd = -1;
    KFORGE_CU_CHECK(
        d, d.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    fd_.reset(fd);
    CUdeviceptr va;
    KFORGE_CU_CHECK(d, d.cuMemAddressReserve(&va, spec_.allocation_bytes, gran, 0, 0));
    va_ = va;
    KFORGE_CU_CHECK(d, d.cuMemMap(va, spec_.allocation_bytes, 0, h, 0));
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    KFORGE_CU_CHECK(d, d.cuMemSetAccess(va, spec_.allocation_bytes, &access, 1));
  } catch (...) {
    release();
    throw;
  }
  tensor_ = view_of(va_ + spec_.offset, shape, dtype, device);
}

SharedBuffer::~SharedBuffer() {
  release();
}

void SharedBuffer::release() {
  const Driver& d = Driver::get();
  tensor_ = torch::Tensor();
  if (va_) {
    d.cuCtxSynchronize();  // nothing of the judge's may still use it
    d.cuMemUnmap(va_, spec_.allocation_bytes);
    d.cuMemAddressFree(va_, spec_.allocation_bytes);
    va_ = 0;
  }
  if (handle_) {
    d.cuMemRelease(handle_);
    handle_ = 0;
  }
}

std::vector<torch::Tensor> SharedBuffer::slack() const {
  int64_t before = static_cast<int64_t>(spec_.offset);
  int64_t after = static_cast<int64_t>(spec_.allocation_bytes - spec_.offset - spec_.bytes);
  return {view_of(va_, {before}, torch::kUInt8, device_),
          view_of(va_ + spec_.offset + spec_.bytes, {after}, torch::kUInt8, device_)};
}

}  // namespace kforge::verify
