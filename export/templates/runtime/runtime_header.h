// KFORGE_NS's runtime, written by `kforge export`: the embedded kernel images loaded once per CUDA
// context (the GPU's own cubin when the library holds one, else the PTX, compiled by the driver),
// the GPU's launch limits, and the library's errors.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "KFORGE_NS/KFORGE_NS.h"
#include "kforge_launch.h"

namespace KFORGE_NS {
namespace detail {

struct Image {
  const unsigned char* data;
  size_t size;
  int sm;    // 90 for sm_90a / compute_90a
  bool ptx;  // else a cubin
  const char* arch;
};

// One op's kernels: its images (cubins, then PTX) and the kernels' lowered names.
struct OpImages {
  const char* op;
  std::vector<Image> images;
  std::vector<const char*> kernels;
};

// The op's module in the current context, with the facts its plan may use.
struct Loaded {
  CUmodule module = nullptr;
  std::vector<CUfunction> functions;
  kforge_launch::Limits limits;
  int64_t num_sms = 0, warp_size = 32, max_shared_per_block = 0;
  std::string image;  // which image loaded ("cubin sm_90a")
};

const Loaded& load(const OpImages& op);

// Throws Error("<op>: <what>: <the driver's name and words>") unless r is CUDA_SUCCESS.
void check(CUresult r, const char* op, const std::string& what);

// A plan expression's operation; throws Error naming the op and the expression on overflow or a
// division by zero (kforge_launch::apply, the arithmetic kforge judged the kernel with).
int64_t op_int(kforge_launch::IntOp o, int64_t a, int64_t b, const char* op, const char* expr);

// The device pointer must be a multiple of `bytes` (the alignment kforge's harness gave it).
void check_aligned(const void* p, size_t bytes, const char* op, const char* tensor);

}  // namespace detail
}  // namespace KFORGE_NS
