// Computed inputs (docs/task-format.md, "Computed inputs"): an input's `transform`, a TorchScript
// expression over its draws, compiled with the prelude as the reference is and applied by the
// generators (generate_cpu, verify's generate_cuda) right after drawing, so every place that draws
// inputs (checks, the judge, admission's unseen sizes) sees the transformed values.
#pragma once

#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kforge/tasks/task.h"

namespace kforge::tasks {

inline constexpr size_t kMaxTransformChars = 1000;
inline constexpr size_t kMaxInputDraws = 8;

// The generator stream (philox's `input` word) of input `index`'s draw `j`: j = 0 is the input's
// own draw (stream `index`, as for an input without a transform), j >= 1 its draws[j - 1]
// (index + j * 2^16; a task file cannot declare 2^16 inputs).
uint32_t draw_stream(size_t index, size_t j);

// The function a transform is compiled to, after kforge's prelude:
//   def kforge_input_transform(<input name>: Tensor, <draw name>: Tensor, ...) -> Tensor:
//       return <transform>
std::string transform_function(const InputSpec& in);

// Compiles `in`'s transform (once per source and process; later calls find it). Throws UsageError
// with TorchScript's message when it does not compile, InputError (field "reference", as
// rewrite_functional names it; its problem() says what) for an F.x the prelude lacks.
void compile_transform(const InputSpec& in, const std::string& file);

// Input `index` of `task` from its draws (its own first, then its draws in order, all on one
// device; float16/bfloat16 draws given as float32): the transform's result, which must have the
// input's shape and dtype (float32 for a float16/bfloat16 input, then rounded to it), made
// contiguous. Throws UsageError (the task's fault) naming the task file and the input when the
// transform fails or returns something else.
torch::Tensor apply_transform(const Task& task, size_t index,
                              const std::vector<torch::Tensor>& drawn);

}  // namespace kforge::tasks
