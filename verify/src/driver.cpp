#include "kforge/verify/driver.h"

#include <dlfcn.h>

#include <cstdio>

namespace kforge::verify {

Driver::Driver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    reason_ =
        std::string("no NVIDIA driver found (") + (err ? err : "libcuda.so.1 not found") + ")";
    return;
  }
  using GetProc =
      CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  if (!get_proc) {
    reason_ =
        "the NVIDIA driver is too old: libcuda.so.1 lacks cuGetProcAddress_v2 (CUDA 12 or newer is "
        "needed)";
    return;
  }
  std::string missing;
#define KFORGE_DRIVER_LOAD(name, version)                                                          \
  {                                                                                                \
    void* fn = nullptr;                                                                            \
    CUdriverProcAddressQueryResult found{};                                                        \
    if (get_proc(#name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS || !fn) \
      missing += std::string(missing.empty() ? "" : ", ") + #name;                                 \
    name = reinterpret_cast<decltype(name)>(fn);                                                   \
  }
  KFORGE_DRIVER_FUNCTIONS(KFORGE_DRIVER_LOAD)
#undef KFORGE_DRIVER_LOAD
  if (!missing.empty()) {
    reason_ = "the NVIDIA driver lacks " + missing + " for CUDA " +
              std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10);
    return;
  }
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    cuGetErrorName(r, &name);
    reason_ = std::string("the NVIDIA driver is present but cuInit failed: ") + (name ? name : "?");
    if (r == CUDA_ERROR_NO_DEVICE)
      reason_ = "the NVIDIA driver is present but sees no GPU (CUDA_ERROR_NO_DEVICE)";
    return;
  }
  int count = 0;
  if (cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    reason_ = "the NVIDIA driver is present but sees no GPU";
    return;
  }
  available_ = true;
}

const Driver& Driver::get() {
  static const Driver driver;
  return driver;
}

void Driver::require(const std::string& what) const {
  if (!available_)
    throw CudaError(what + " needs an NVIDIA GPU, and none can be used here: " + reason_);
}

void Driver::check(CUresult r, const char* expr, const char* file, int line) const {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName) cuGetErrorName(r, &name);
  if (cuGetErrorString) cuGetErrorString(r, &text);
  throw CudaError(std::string(expr) + " failed: " + (name ? name : std::to_string(r)) + " (" +
                      (text ? text : "") + ") at " + file + ":" + std::to_string(line),
                  static_cast<int>(r));
}

int driver_version() {
  const Driver& d = Driver::get();
  d.require("reading the driver version");
  int v = 0;
  KFORGE_CU_CHECK(d, d.cuDriverGetVersion(&v));
  return v;
}

std::vector<DeviceInfo> list_devices() {
  const Driver& d = Driver::get();
  d.require("listing GPUs");
  int count = 0;
  KFORGE_CU_CHECK(d, d.cuDeviceGetCount(&count));
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    CUdevice dev;
    KFORGE_CU_CHECK(d, d.cuDeviceGet(&dev, i));
    DeviceInfo info;
    info.ordinal = i;
    char name[256] = {};
    KFORGE_CU_CHECK(d, d.cuDeviceGetName(name, sizeof name, dev));
    info.name = name;
    CUuuid uuid;
    KFORGE_CU_CHECK(d, d.cuDeviceGetUuid(&uuid, dev));
    char hex[64];
    std::string u = "GPU-";
    for (int b = 0; b < 16; ++b) {
      std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(uuid.bytes[b]));
      u += hex;
      if (b == 3 || b == 5 || b == 7 || b == 9) u += "-";
    }
    info.uuid = u;
    auto attr = [&](CUdevice_attribute a) {
      int v = 0;
      KFORGE_CU_CHECK(d, d.cuDeviceGetAttribute(&v, a, dev));
      return v;
    };
    info.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    info.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    info.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    info.max_shared_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    info.clock_khz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
    info.memory_clock_khz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    info.memory_bus_bits = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    KFORGE_CU_CHECK(d, d.cuDeviceTotalMem(&info.memory_bytes, dev));
    out.push_back(info);
  }
  return out;
}

}  // namespace kforge::verify
