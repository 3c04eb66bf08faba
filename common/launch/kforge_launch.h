// kforge's launch semantics, in one header that depends on nothing but <cuda.h> and the standard
// library: the integer arithmetic of plan expressions (exact 64-bit, overflow an error), the limits
// a launch must keep, and how a launch is made (parameters, dynamic shared memory above 48 KiB,
// cooperative and cluster launches). kforge's expression evaluator, its plan evaluation and its
// runner use it, and `kforge export` copies it unchanged into every exported library, whose
// generated launch code calls it: one implementation, not two (docs/export.md).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kforge_launch {

// ---- Integer arithmetic of plan expressions
// ------------------------------------------------------

enum class IntOp { Add, Sub, Mul, Div, Mod, CeilDiv, Min, Max, Eq, Ne, Lt, Le, Gt, Ge, And, Or };

enum class IntError { None, Overflow, DivisionByZero, CeilDivByNonPositive, CeilDivOfNegative };

// `a op b` into *out; the error otherwise (*out untouched). `/` and `%` are C's (truncating).
inline IntError apply(IntOp op, int64_t a, int64_t b, int64_t* out) {
  switch (op) {
    case IntOp::Add:
      return __builtin_add_overflow(a, b, out) ? IntError::Overflow : IntError::None;
    case IntOp::Sub:
      return __builtin_sub_overflow(a, b, out) ? IntError::Overflow : IntError::None;
    case IntOp::Mul:
      return __builtin_mul_overflow(a, b, out) ? IntError::Overflow : IntError::None;
    case IntOp::Div:
    case IntOp::Mod:
      if (b == 0) return IntError::DivisionByZero;
      if (a == INT64_MIN && b == -1) return IntError::Overflow;
      *out = op == IntOp::Div ? a / b : a % b;
      return IntError::None;
    case IntOp::CeilDiv:
      if (b <= 0) return IntError::CeilDivByNonPositive;
      if (a < 0) return IntError::CeilDivOfNegative;
      *out = a / b + (a % b != 0);
      return IntError::None;
    case IntOp::Min:
      *out = a < b ? a : b;
      return IntError::None;
    case IntOp::Max:
      *out = a > b ? a : b;
      return IntError::None;
    case IntOp::Eq:
      *out = a == b;
      return IntError::None;
    case IntOp::Ne:
      *out = a != b;
      return IntError::None;
    case IntOp::Lt:
      *out = a < b;
      return IntError::None;
    case IntOp::Le:
      *out = a <= b;
      return IntError::None;
    case IntOp::Gt:
      *out = a > b;
      return IntError::None;
    case IntOp::Ge:
      *out = a >= b;
      return IntError::None;
    case IntOp::And:
      *out = a != 0 && b != 0;
      return IntError::None;
    case IntOp::Or:
      *out = a != 0 || b != 0;
      return IntError::None;
  }
  return IntError::Overflow;
}

inline const char* describe(IntError e) {
  switch (e) {
    case IntError::None:
      return "no error";
    case IntError::Overflow:
      return "64-bit integer overflow";
    case IntError::DivisionByZero:
      return "division by zero";
    case IntError::CeilDivByNonPositive:
      return "ceil_div by a non-positive number";
    case IntError::CeilDivOfNegative:
      return "ceil_div of a negative number";
  }
  return "error";
}

// ---- A launch, its limits, and making it
// ---------------------------------------------------------

struct Launch {
  int64_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, cluster[3] = {1, 1, 1};
  int64_t shared_bytes = 0;
  bool cooperative = false;
};

// What the GPU allows (kforge's DeviceFacts; an exported library asks the driver).
struct Limits {
  int64_t max_grid[3] = {2147483647, 65535, 65535};
  int64_t max_block[3] = {1024, 1024, 64};
  int64_t max_threads_per_block = 1024;
  int64_t max_shared_per_block = 232448;  // with the opt-in attribute
};

// The first limit `l` breaks (clusters on a GPU older than sm_90 are the driver's to refuse): which
// field ("grid", "block", "cluster", "shared_bytes") and why; an empty field when it keeps them
// all.
struct LimitProblem {
  std::string field, why;
  bool ok() const { return field.empty(); }
};

inline LimitProblem check_limits(const Launch& l, const Limits& lim) {
  const char* axis[] = {"x", "y", "z"};
  auto s = [](int64_t v) { return std::to_string(v); };
  for (int k = 0; k < 3; ++k) {
    if (l.grid[k] < 1 || l.grid[k] > lim.max_grid[k])
      return {"grid", std::string(axis[k]) + " is " + s(l.grid[k]) +
                          "|; it must be between 1 and " + s(lim.max_grid[k])};
    if (l.block[k] < 1 || l.block[k] > lim.max_block[k])
      return {"block", std::string(axis[k]) + " is " + s(l.block[k]) +
                           "|; it must be between 1 and " + s(lim.max_block[k])};
    if (l.cluster[k] < 1 || l.cluster[k] > 16)
      return {"cluster",
              std::string(axis[k]) + " is " + s(l.cluster[k]) + "|; it must be between 1 and 16"};
    if (l.grid[k] % l.cluster[k] != 0)
      return {"cluster", std::string("grid ") + axis[k] + " (" + s(l.grid[k]) +
                             ") is not a multiple of cluster " + axis[k] + " (" + s(l.cluster[k]) +
                             ")|"};
  }
  int64_t threads = l.block[0] * l.block[1] * l.block[2];
  if (threads > lim.max_threads_per_block)
    return {"block",
            s(threads) + " threads per block|; the limit is " + s(lim.max_threads_per_block)};
  int64_t cluster = l.cluster[0] * l.cluster[1] * l.cluster[2];
  if (cluster > 8) return {"cluster", s(cluster) + " blocks per cluster|; the portable limit is 8"};
  if (l.shared_bytes < 0 || l.shared_bytes > lim.max_shared_per_block)
    return {"shared_bytes", s(l.shared_bytes) + "|; the limit is " + s(lim.max_shared_per_block) +
                                " bytes per block"};
  return {};
}
// check_limits' `why` holds one '|': where the caller's "for <configuration>" goes (kforge's
// messages name the dims and tunables there); this puts `where` in its place.
inline std::string place(const std::string& why, const std::string& where) {
  size_t bar = why.find('|');
  return bar == std::string::npos ? why + where : why.substr(0, bar) + where + why.substr(bar + 1);
}

// ---- Tensor maps (TMA)
// ------------------------------------------------------------------------------

// A tensor as Hopper's tensor memory accelerator sees it: dense and row-major, `dims` outermost
// first as a task writes shapes, read and written in boxes of `box` elements, the box's rows
// swizzled in shared memory over `swizzle` bytes (0: none). The driver encodes it at launch into
// the 128-byte CUtensorMap the kernel takes by value (`const __grid_constant__ CUtensorMap`).
// Elements outside `dims` read as zero and are never written: the map is the bound, once its rows
// are whole 16-byte units (check_tensor_map).
struct TensorMap {
  int rank = 0;  // 1 to 5; 0: the argument is not a tensor map
  int64_t dims[5] = {}, box[5] = {};
  int element_bytes = 4;
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  int swizzle = 0;  // 0, 32, 64 or 128 bytes
};

// The first rule of cuTensorMapEncodeTiled's (and kforge's: the map stays inside the tensor's
// `tensor_bytes`) that `m` breaks, as "field|: why" for place(); empty when it keeps them all.
inline std::string check_tensor_map(const TensorMap& m, int64_t tensor_bytes) {
  auto s = [](int64_t v) { return std::to_string(v); };
  if (m.rank < 1 || m.rank > 5) return "dims|: " + s(m.rank) + " dims; a tensor map has 1 to 5";
  if (m.element_bytes != 1 && m.element_bytes != 2 && m.element_bytes != 4 && m.element_bytes != 8)
    return "element_bytes|: " + s(m.element_bytes) + "; an element is 1, 2, 4 or 8 bytes";
  int64_t extent = m.element_bytes;  // bytes the map spans, and the stride of the dim being read
  for (int i = m.rank - 1; i >= 0; --i) {
    std::string d = "[" + s(i) + "]";
    if (m.dims[i] < 1 || m.dims[i] > (int64_t{1} << 32))
      return "dims" + d + "|: " + s(m.dims[i]) + "; each dim must be between 1 and 2^32";
    if (m.box[i] < 1 || m.box[i] > 256)
      return "box" + d + "|: " + s(m.box[i]) + "; each box size must be between 1 and 256";
    if (i < m.rank - 1 && extent >= (int64_t{1} << 40))
      return "dims" + d + "|: its rows are " + s(extent) + " bytes apart; the limit is 2^40";
    if (__builtin_mul_overflow(extent, m.dims[i], &extent))
      return "dims|: the map spans more than 2^63 bytes";
    // The driver asks this of every stride but the row's own; an H100 showed the row needs it too:
    // a 12-byte row's TMA store wrote 16 bytes (the memory moves in 16-byte units).
    if (i == m.rank - 1 && extent % 16 != 0)
      return "dims" + d + "|: a row is " + s(extent) +
             " bytes; it must be a multiple of 16 (the TMA moves memory in 16-byte units and "
             "would write past the row's end)";
  }
  int64_t row = m.box[m.rank - 1] * m.element_bytes;
  if (row % 16 != 0)
    return "box[" + s(m.rank - 1) + "]|: a box row is " + s(row) +
           " bytes; it must be a multiple of 16";
  if (m.swizzle != 0 && m.swizzle != 32 && m.swizzle != 64 && m.swizzle != 128)
    return "swizzle|: " + s(m.swizzle) + "; it must be 0, 32, 64 or 128 (bytes)";
  if (m.swizzle != 0 && row > m.swizzle)
    return "box[" + s(m.rank - 1) + "]|: a box row is " + s(row) + " bytes, more than the " +
           s(m.swizzle) + "-byte swizzle";
  if (extent > tensor_bytes)
    return "dims|: the map spans " + s(extent) + " bytes but the tensor has " + s(tensor_bytes);
  return {};
}

// A kernel parameter: a device pointer, an integer passed as 4 or 8 bytes (the kernel's type), or
// a tensor map over the tensor at `value`.
struct Arg {
  bool pointer = false;
  uint64_t value = 0;  // the pointer, or the integer's bits
  int bytes = 8;
  TensorMap map;  // rank > 0: the parameter is this map of the tensor at `value`
};

// How wide an integer argument is passed: 4 bytes for a 32-bit kernel parameter, else 8 (pointers,
// 64-bit integers, and parameters whose type kforge could not read).
inline int int_arg_bytes(int param_bits) {
  return param_bits == 32 ? 4 : 8;
}

// The driver entry points a launch needs, as pointers: kforge's runner fills them from the libcuda
// it opened at run time; an exported library from the libcuda it links (Driver::linked()).
struct Driver {
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**) = nullptr;
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                     const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                     const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                     CUtensorMapL2promotion, CUtensorMapFloatOOBfill) = nullptr;
#ifndef KFORGE_LAUNCH_NO_LINKED_DRIVER
  static Driver linked() {
    Driver d;
    d.cuFuncSetAttribute = &::cuFuncSetAttribute;
    d.cuLaunchKernel = &::cuLaunchKernel;
    d.cuLaunchKernelEx = &::cuLaunchKernelEx;
    d.cuTensorMapEncodeTiled = &::cuTensorMapEncodeTiled;
    return d;
  }
#endif
};

// Encodes `m` over the tensor at `address` (interleave none, elements read one by one, L2
// promotion of 128 bytes, out-of-bounds elements zero).
inline CUresult encode_tensor_map(const Driver& d, const TensorMap& m, uint64_t address,
                                  CUtensorMap* out) {
  if (!d.cuTensorMapEncodeTiled) return CUDA_ERROR_NOT_SUPPORTED;
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5], element_strides[5];
  uint64_t stride = static_cast<uint64_t>(m.element_bytes);
  for (int i = 0; i < m.rank; ++i) {  // the driver's order: innermost first
    const int k = m.rank - 1 - i;
    dims[i] = static_cast<cuuint64_t>(m.dims[k]);
    box[i] = static_cast<cuuint32_t>(m.box[k]);
    element_strides[i] = 1;
    if (i > 0) strides[i - 1] = stride;
    stride *= dims[i];
  }
  const CUtensorMapSwizzle swizzle = m.swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                     : m.swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                     : m.swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                       : CU_TENSOR_MAP_SWIZZLE_NONE;
  return d.cuTensorMapEncodeTiled(
      out, m.type, static_cast<cuuint32_t>(m.rank), reinterpret_cast<void*>(address), dims, strides,
      box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// Launches `f` on `stream` as `l` says; `what` (on failure) names the step that failed:
// "allowing N bytes of dynamic shared memory" or "launching".
inline CUresult launch(const Driver& d, CUfunction f, const Launch& l, const std::vector<Arg>& args,
                       CUstream stream, std::string* what = nullptr) {
  std::vector<uint64_t> storage(args.size());
  std::vector<CUtensorMap> maps;  // sized at the first tensor map: most launches pass none
  std::vector<void*> params(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].map.rank > 0) {
      if (maps.empty()) maps.resize(args.size());  // once, so &maps[i] stays valid
      CUresult r = encode_tensor_map(d, args[i].map, args[i].value, &maps[i]);
      if (r != CUDA_SUCCESS) {
        if (what) *what = "encoding the tensor map of argument " + std::to_string(i);
        return r;
      }
      params[i] = &maps[i];
      continue;
    }
    if (args[i].pointer || args[i].bytes == 8) {
      storage[i] = args[i].value;
    } else {
      int32_t v = static_cast<int32_t>(static_cast<int64_t>(args[i].value));
      std::memcpy(&storage[i], &v, 4);
    }
    params[i] = &storage[i];
  }
  if (l.shared_bytes > 48 * 1024) {
    CUresult r = d.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      static_cast<int>(l.shared_bytes));
    if (r != CUDA_SUCCESS) {
      if (what)
        *what = "allowing " + std::to_string(l.shared_bytes) + " bytes of dynamic shared memory";
      return r;
    }
  }
  if (what) *what = "launching";
  auto u = [](int64_t v) { return static_cast<unsigned>(v); };
  if (l.cluster[0] * l.cluster[1] * l.cluster[2] > 1 || l.cooperative) {
    CUlaunchConfig config{};
    config.gridDimX = u(l.grid[0]), config.gridDimY = u(l.grid[1]), config.gridDimZ = u(l.grid[2]);
    config.blockDimX = u(l.block[0]), config.blockDimY = u(l.block[1]),
    config.blockDimZ = u(l.block[2]);
    config.sharedMemBytes = u(l.shared_bytes);
    config.hStream = stream;
    CUlaunchAttribute attrs[2]{};
    unsigned n = 0;
    if (l.cooperative) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
      attrs[n++].value.cooperative = 1;
    }
    if (l.cluster[0] * l.cluster[1] * l.cluster[2] > 1) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attrs[n].value.clusterDim.x = u(l.cluster[0]);
      attrs[n].value.clusterDim.y = u(l.cluster[1]);
      attrs[n++].value.clusterDim.z = u(l.cluster[2]);
    }
    config.attrs = attrs;
    config.numAttrs = n;
    return d.cuLaunchKernelEx(&config, f, params.data(), nullptr);
  }
  return d.cuLaunchKernel(f, u(l.grid[0]), u(l.grid[1]), u(l.grid[2]), u(l.block[0]), u(l.block[1]),
                          u(l.block[2]), u(l.shared_bytes), stream, params.data(), nullptr);
}

}  // namespace kforge_launch
