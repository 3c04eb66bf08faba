// The CUDA driver API, loaded at run time: kforge starts on machines without a GPU and says, per
// command, why a GPU command cannot run. libcuda.so.1 is dlopen'ed and every symbol is fetched
// through cuGetProcAddress for this header's CUDA version (plain dlsym returns old ABIs: the header
// maps cuMemAlloc to cuMemAlloc_v2).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>
#include <vector>

#include "kforge/common/error.h"

namespace kforge::verify {

class CudaError : public Error {
 public:
  using Error::Error;
  CudaError(const std::string& what, int code) : Error(what), code_(code) {}
  // The CUresult of the failed call; 0 for "no usable GPU here".
  int code() const { return code_; }

 private:
  int code_ = 0;
};

// Each entry names the driver ABI version whose signature kforge calls (cudaTypedefs.h's
// PFN_<name>_v<version>). Asking cuGetProcAddress for "the newest" instead is a trap: with CUDA 13
// headers, cuCtxSynchronize resolves to cuCtxSynchronize_v2(CUcontext), so a call through the
// old no-argument signature passes garbage and fails with CUDA_ERROR_CONTEXT_IS_DESTROYED (seen
// on the H200, 2026-12-02).
#define KFORGE_DRIVER_FUNCTIONS(X)         \
  X(cuInit, 2000)                          \
  X(cuDriverGetVersion, 2020)              \
  X(cuGetErrorName, 6000)                  \
  X(cuGetErrorString, 6000)                \
  X(cuDeviceGetCount, 2000)                \
  X(cuDeviceGet, 2000)                     \
  X(cuDeviceGetName, 2000)                 \
  X(cuDeviceGetAttribute, 2000)            \
  X(cuDeviceTotalMem, 3020)                \
  X(cuDeviceGetUuid, 11040)                \
  X(cuDevicePrimaryCtxRetain, 7000)        \
  X(cuDevicePrimaryCtxRelease, 11000)      \
  X(cuCtxSetCurrent, 4000)                 \
  X(cuCtxSynchronize, 2000)                \
  X(cuModuleLoadData, 2000)                \
  X(cuModuleUnload, 2000)                  \
  X(cuModuleGetFunction, 2000)             \
  X(cuLaunchKernel, 4000)                  \
  X(cuLaunchCooperativeKernel, 9000)       \
  X(cuLaunchKernelEx, 11060)               \
  X(cuFuncSetAttribute, 9000)              \
  X(cuTensorMapEncodeTiled, 12000)         \
  X(cuModuleGetGlobal, 3020)               \
  X(cuMemGetAllocationGranularity, 10020)  \
  X(cuMemCreate, 10020)                    \
  X(cuMemRelease, 10020)                   \
  X(cuMemExportToShareableHandle, 10020)   \
  X(cuMemImportFromShareableHandle, 10020) \
  X(cuMemAddressReserve, 10020)            \
  X(cuMemAddressFree, 10020)               \
  X(cuMemMap, 10020)                       \
  X(cuMemUnmap, 10020)                     \
  X(cuMemSetAccess, 10020)                 \
  X(cuMemGetInfo, 3020)                    \
  X(cuMemAlloc, 3020)                      \
  X(cuMemFree, 3020)                       \
  X(cuMemHostAlloc, 2020)                  \
  X(cuMemFreeHost, 2000)                   \
  X(cuMemHostGetDevicePointer, 3020)       \
  X(cuMemcpyHtoD, 3020)                    \
  X(cuMemcpyHtoDAsync, 3020)               \
  X(cuMemcpyDtoH, 3020)                    \
  X(cuMemcpyDtoDAsync, 3020)               \
  X(cuMemsetD8Async, 3020)                 \
  X(cuStreamCreate, 2000)                  \
  X(cuStreamDestroy, 4000)                 \
  X(cuStreamSynchronize, 2000)             \
  X(cuEventCreate, 2000)                   \
  X(cuEventDestroy, 4000)                  \
  X(cuEventRecord, 2000)                   \
  X(cuEventSynchronize, 2000)              \
  X(cuEventElapsedTime, 2000)

class Driver {
 public:
  // The process-wide driver; loaded (and cuInit'ed) on first use. Never throws: check available().
  static const Driver& get();

  bool available() const { return available_; }
  // Why no GPU can be used ("no NVIDIA driver: libcuda.so.1: cannot open shared object file").
  const std::string& unavailable_reason() const { return reason_; }
  // Throws CudaError("<what> needs an NVIDIA GPU: <reason>") when unavailable.
  void require(const std::string& what) const;

  // Throws CudaError naming the call, the error and the source location.
  void check(CUresult r, const char* expr, const char* file, int line) const;

#define KFORGE_DRIVER_MEMBER(name, version) PFN_##name##_v##version name = nullptr;
  KFORGE_DRIVER_FUNCTIONS(KFORGE_DRIVER_MEMBER)
#undef KFORGE_DRIVER_MEMBER

 private:
  Driver();
  bool available_ = false;
  std::string reason_;
};

#define KFORGE_CU_CHECK(driver, expr) (driver).check((expr), #expr, __FILE__, __LINE__)

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  std::string uuid;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int l2_bytes = 0;
  size_t memory_bytes = 0;
  int max_shared_per_block_optin = 0;
  int clock_khz = 0;
  int memory_clock_khz = 0;
  int memory_bus_bits = 0;
};

// Device memory the judge shares with runners: pinned on `device`, exportable as a POSIX file
// descriptor (VMM, docs/protocol.md).
inline CUmemAllocationProp shareable_allocation(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

int driver_version();                    // e.g. 13000
std::vector<DeviceInfo> list_devices();  // requires a driver

}  // namespace kforge::verify
