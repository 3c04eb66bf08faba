// A task's output shapes as expressions over its dims, fitted from the sizes the reference gives
// at several configurations: what `kforge export` declares for each op, and what `kforge tasks
// show` falls back on where the meta device lacks an op (a convolution in LibTorch 1.13).
#pragma once

#include <cstdint>
#include <vector>

#include "kforge/common/expr.h"
#include "kforge/tasks/reference.h"
#include "kforge/tasks/task.h"

namespace kforge::tasks {

// The outputs' shapes over dims, from their sizes at several configurations: each axis the first
// of the inputs' shape entries, the dims, such an entry plus or minus up to 8 and divided by up to
// 4 (convolutions, pools), or a constant that fits every configuration. Throws kforge::Error
// naming the output and axis when none fits.
std::vector<std::vector<Expr>> infer_output_shapes(
    const Task& task, const std::vector<std::vector<std::vector<int64_t>>>& sizes_per_config,
    const std::vector<Dims>& configs);

// The sizes at every configuration (check dims and timed dims): the meta device, else a CPU run of
// the reference on zeros where the inputs are at most 64 MiB; then infer_output_shapes over those
// known. Throws kforge::Error when fewer than two are known or no expression fits.
std::vector<std::vector<Expr>> fit_output_shapes(const Task& task, const Reference& ref);

}  // namespace kforge::tasks
