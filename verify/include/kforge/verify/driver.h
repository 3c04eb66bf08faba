// The CUDA driver API, loaded at run time: kforge starts on machines without a GPU and says, per
// command, why a GPU command cannot run. libcuda.so.1 is dlopen'ed and every symbol is fetched
// through cuGetProcAddress for this header's CUDA version (plain dlsym returns old ABIs: the header
// maps cuMemAlloc to cuMemAlloc_v2).
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

#include "kforge/common/error.h"

namespace kforge::verify {

class CudaError : public Error {
 public:
  using Error::Error;
};

#define KFORGE_DRIVER_FUNCTIONS(X) \
  X(cuInit)                        \
  X(cuDriverGetVersion)            \
  X(cuGetErrorName)                \
  X(cuGetErrorString)              \
  X(cuDeviceGetCount)              \
  X(cuDeviceGet)                   \
  X(cuDeviceGetName)               \
  X(cuDeviceGetAttribute)          \
  X(cuDeviceTotalMem)              \
  X(cuDeviceGetUuid)               \
  X(cuDevicePrimaryCtxRetain)      \
  X(cuDevicePrimaryCtxRelease)     \
  X(cuCtxSetCurrent)               \
  X(cuCtxSynchronize)              \
  X(cuModuleLoadData)              \
  X(cuModuleUnload)                \
  X(cuModuleGetFunction)           \
  X(cuLaunchKernel)

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

#define KFORGE_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
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

int driver_version();                // e.g. 13000
std::vector<DeviceInfo> list_devices();  // requires a driver

}  // namespace kforge::verify
