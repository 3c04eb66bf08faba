// Device memory for judging (docs/decisions.md, "Judging on GPUs with less memory"): what one
// verification needs at a task's timed dims, how many timing input sets fit the GPU's free memory,
// and the does_not_fit verdict when not even the minimum does. The planning is pure (tested
// without a GPU); device_memory() and release_torch_cache() need one.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/common/error.h"

namespace kforge::verify {

// One tensor's size, as the planning sees it.
struct TensorSize {
  uint64_t numel = 0;
  uint64_t element_bytes = 4;
  bool floating = true;
  uint64_t bytes() const { return numel * element_bytes; }
};

// Where the device memory of one verification at the timed dims goes (the judge's allocations;
// LibTorch's caching allocator rounds them up a little, which the reserve covers):
// - buffers: the configuration's shared buffers (inputs, outputs, workspaces), each its own VMM
//   allocation rounded up to the allocation granularity with at least 256 slack bytes before the
//   tensor (shared_buffer.h). The unmapped guard gaps around them in the runner are address space
//   only: they take no memory.
// - set: one input set of the timing pool: its inputs and eager's outputs on them. The pool's sets
//   are alive together from the correctness seeds that make them until the baselines are timed.
// - working: what one correctness seed needs beside the sets kept: run 1's outputs copied, the
//   large buffers' cached random finite poison, the float64 reference (its widened floating
//   inputs, its outputs, and one temporary of the larger of the two for the reference's own
//   intermediates), and the comparison's temporaries (4 float64 chunks of at most 2^26 elements).
//   It also covers the timing's top-up draws and the baselines' copy of a set with its outputs.
// - reserve: what the estimate cannot see: allocator rounding and fragmentation, LibTorch's and
//   cuBLAS's workspaces, the L2 flush buffer. max(1 GiB, total / 32).
struct MemoryNeeds {
  uint64_t buffers = 0, set = 0, working = 0, reserve = 0;
  // Bytes for `sets` pool sets.
  uint64_t for_sets(int sets) const;
  nlohmann::json to_json() const;
};

inline constexpr uint64_t kMinReserveBytes = uint64_t{1} << 30;
inline constexpr uint64_t kCompareChunkElements = uint64_t{1} << 26;  // compare.h's kCompareChunk
inline constexpr uint64_t kCachedPoisonMinElements = uint64_t{1} << 20;  // judge_parts.h

// The shared buffers' bytes as allocated: buffer_layout's allocation_bytes summed.
uint64_t buffer_allocation_bytes(const std::vector<TensorSize>& tensors, uint64_t granularity);

// The needs of one configuration (see MemoryNeeds); `total` is the device's memory (the reserve).
MemoryNeeds memory_needs(const std::vector<TensorSize>& inputs,
                         const std::vector<TensorSize>& outputs,
                         const std::vector<TensorSize>& workspaces, uint64_t granularity,
                         uint64_t total);

// The fewest timing input sets that keep timing honest: consecutive repetitions see different
// inputs, and every timed output is checked against two sets' eager outputs (docs/decisions.md).
inline constexpr int kMinPoolSets = 2;

// What the device had free when a plan was made (device_memory(), which needs a GPU).
struct DeviceMemory {
  uint64_t free = 0, total = 0;
  // LibTorch's caching allocator in this process (nullopt where LibTorch has no CUDA or has not
  // used this device): bytes in live tensors, and in segments it holds from the driver, live or
  // cached. What is used and not reserved by LibTorch belongs to the driver's contexts, the
  // judge's and the runner's buffers, other libraries and other processes.
  std::optional<uint64_t> torch_allocated, torch_reserved;
};

// How many timing input sets a verification keeps, from its needs and the bytes it may use.
struct PoolPlan {
  MemoryNeeds needs;
  int wanted = 0;   // options.timing.pool (1 without timing: correctness keeps one set at a time)
  int minimum = 0;  // min(wanted, kMinPoolSets)
  int sets = 0;     // kept: min(wanted, as many as fit); 0 when not even `minimum` fits
  bool fits = false;
  uint64_t needed = 0;     // needs.for_sets(minimum)
  uint64_t available = 0;  // what the plan was made with: min(free, limit)
  // The device as the plan was made with it (set by the judge; 0 / nullopt where unknown).
  DeviceMemory device;
  std::optional<uint64_t> limit;      // VerifyOptions::memory_limit or $KFORGE_GPU_MEMORY_LIMIT
  bool released_torch_cache = false;  // LibTorch's cached blocks were given back before measuring
  // "the timed dims need N bytes (..) of GPU memory ..., and only M bytes (..) are free": names the
  // bytes needed and available (and the limit, when one is set).
  std::string shortfall() const;
  nlohmann::json to_json() const;
};

// sets = min(wanted, floor((available - buffers - working - reserve) / set)); fits when sets >=
// minimum (a set of 0 bytes always fits). minimum is clamped to [1, wanted].
PoolPlan plan_pool(const MemoryNeeds& needs, uint64_t available, int wanted,
                   int minimum = kMinPoolSets);

// "24GiB", "512 MiB", "80G", "1000000" (bytes): the sizes KFORGE_GPU_MEMORY_LIMIT takes (K, M, G,
// T and their KiB... spellings are powers of 1024). nullopt for anything else, zero included.
std::optional<uint64_t> parse_bytes(std::string_view text);
// "41.3 GiB", "512.0 MiB", "900 bytes".
std::string format_bytes(uint64_t bytes);

// The judge's memory limit: `option` when set, else $KFORGE_GPU_MEMORY_LIMIT (a size for
// parse_bytes), else none. Throws kforge::Error naming the variable when its value is not a size.
std::optional<uint64_t> memory_limit(std::optional<uint64_t> option);

// Not even the minimum fits: the verification stops before allocating anything for the timed dims
// and the verdict is does_not_fit (the plan in its evidence).
class MemoryShortfall : public Error {
 public:
  explicit MemoryShortfall(PoolPlan plan) : Error(plan.shortfall()), plan_(std::move(plan)) {}
  const PoolPlan& plan() const { return plan_; }

 private:
  PoolPlan plan_;
};

// ---- Needs a GPU ------------------------------------------------------------------------------

// cuMemGetInfo on `device`'s primary context (other processes' use, the runner's included, is
// not free), with LibTorch's own figures beside it.
DeviceMemory device_memory(int device);
// Gives LibTorch's cached but unused blocks (on every device) back to the driver, so that the
// judge's own VMM allocations (cuMemCreate) can have them. LibTorch keeps freed blocks for reuse
// and releases them only when one of its own allocations fails. With a LibTorch built with CUDA
// this is its allocator's emptyCache (c10_cuda, linked where the LibTorch has it); a LibTorch
// without CUDA holds no GPU memory, and there it does nothing and returns false.
bool release_torch_cache(int device);
// Asks LibTorch's caching allocator, before its first use in this process, not to split cached
// blocks of 512 MiB or more ($PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512, unless the user set
// that variable or PYTORCH_ALLOC_CONF). Otherwise a small allocation that lives as long as the
// process (cuBLAS's workspace, at the first matmul) can be carved out of a multi-GiB block that a
// float64 reference freed, and release_torch_cache can never give that block back: session 30's
// run had 19 GiB of an H100 in use at its first verification with LibTorch's cache given back.
// Call it first thing in main(); it does nothing once the allocator has started.
void keep_large_cached_blocks_whole();
// An allocation that failed: a CudaError with CUDA_ERROR_OUT_OF_MEMORY, LibTorch's
// c10::OutOfMemoryError, or either as TorchScript's interpreter rethrows it (a runtime_error whose
// message keeps LibTorch's "CUDA out of memory" or the driver's error name).
bool is_out_of_memory(const std::exception& e);

}  // namespace kforge::verify
