// A task's reference: its TorchScript source, rewritten onto kforge's prelude and compiled with
// torch::jit::compile. Runs on any device LibTorch has.
#pragma once

#include <torch/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kforge/tasks/generator.h"
#include "kforge/tasks/task.h"

namespace torch::jit {
struct CompilationUnit;
struct Graph;
}  // namespace torch::jit

namespace kforge::tasks {

// The prelude for the LibTorch this binary was built with (common part + per-major-version part).
std::string_view prelude_version();  // "v1" or "v2"
const std::string& prelude_source();
// Names `x` such that F.x(...) can be used in a reference.
const std::vector<std::string>& prelude_functions();

// Rewrites `F.x(` and `torch.nn.functional.x(` to `F_x(`; throws InputError naming any function
// the prelude lacks (file, line and field "reference"). `first_line` is the file line of the
// reference's first line, when known.
std::string rewrite_functional(const std::string& source, const std::string& file,
                               std::optional<int> first_line);

class Reference {
 public:
  // Compiles the task's reference; throws InputError (field "reference") when it does not compile
  // or its forward() does not take one Tensor per declared input.
  static Reference compile(const Task& task, std::optional<int> first_line = std::nullopt);

  // Runs forward on the given inputs (their device is the device it runs on) and returns the
  // outputs, a tuple flattened. Throws kforge::Error with TorchScript's message on failure.
  std::vector<torch::Tensor> run(const std::vector<torch::Tensor>& inputs) const;

  size_t output_count() const { return output_count_; }

  // forward()'s graph as TorchScript IR text (what the interpreter runs; tests read it).
  std::string graph_text() const;
  // A copy of forward()'s graph, the caller's to change (shape analysis).
  std::shared_ptr<torch::jit::Graph> graph_copy() const;

 private:
  std::shared_ptr<torch::jit::CompilationUnit> unit_;
  size_t output_count_ = 1;
};

// Called by load_task: compiles the reference and checks forward()'s signature (errors name the
// task file's lines), and keeps what it compiled in shared_references() (reference_cache.h), so
// that the parts that need the reference later do not compile it again.
void validate_reference(const Task& task, std::optional<int> first_line);

// Names of a task's outputs: [[outputs]] if declared, else "out" or out0..outK.
std::vector<std::string> output_names(const Task& task, size_t count);

}  // namespace kforge::tasks

namespace kforge::tasks {

struct TensorShape {
  std::vector<int64_t> sizes;
  Dtype dtype = Dtype::Float32;
  int64_t bytes() const;
};

// Output shapes and dtypes at `dims`, found by running the reference on LibTorch's meta device
// (no data, no time). nullopt when an op of the reference has no meta kernel.
std::optional<std::vector<TensorShape>> output_shapes(const Task& task, const Reference& ref,
                                                      const Dims& dims);

// The largest inputs, in bytes, that known_output_shapes runs the reference on the CPU with (the
// KernelBench importer's bound for its check at the timed sizes).
inline constexpr int64_t kCpuShapeBytes = int64_t{32} << 20;

// Output shapes and dtypes at `dims` without a GPU, the cheapest way that tells: the meta device
// (output_shapes); else LibTorch's shape functions over forward()'s graph given the inputs' sizes
// (its symbolic shape analysis: no data, no run; ops whose output has their input's shape, such as
// group_norm, carry it where LibTorch has no function), trusted only where they give every output's
// sizes and agree with the reference's own outputs at every [check] configuration that can be run
// (on the meta device, or on the CPU where the inputs fit in kCpuShapeBytes), at least one;
// else the reference run on the CPU at `dims` where the inputs fit in kCpuShapeBytes. nullopt when
// none tells (large inputs and an op with neither a meta kernel nor a shape function, as
// group_norm in LibTorch 1.13). Worked out once per task and dims in a process.
std::optional<std::vector<TensorShape>> known_output_shapes(const Task& task, const Reference& ref,
                                                            const Dims& dims);

// Bytes that must move at `dims`: `min_bytes` when declared, else every input read once and every
// output written once (nullopt when the output shapes are unknown).
std::optional<double> bytes_that_must_move(const Task& task, const Reference& ref,
                                           const Dims& dims);

}  // namespace kforge::tasks

namespace kforge::tasks {

struct OutputInfo {
  std::string name;
  Dtype dtype = Dtype::Float32;
  size_t rank = 0;
};

// Names and dtypes of a task's outputs, without a GPU: from the meta device, else by running the
// reference on the CPU at the smallest configuration. On a CPU, float16/bfloat16 tasks run upcast;
// their float32 outputs are reported in the inputs' low-precision dtype (what the GPU returns).
// A declared [[outputs]] dtype wins.
std::vector<OutputInfo> describe_outputs(const Task& task, const Reference& ref);

}  // namespace kforge::tasks
