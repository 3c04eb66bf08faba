// A KernelBench wrapper (the host function forward() calls) read as kforge needs it: its
// statements are run symbolically, without a GPU and without running anything of the answer,
// over the task's tensors. Sizes become plan expressions over the task's dims, tensors the
// wrapper allocates become outputs or workspaces, and each kernel launch becomes a plan launch.
// Whatever a plan cannot say is refused with the line and the construct: PyTorch operations,
// cuBLAS/cuDNN, streams, memory copies, launches chosen or repeated by the sizes, floats computed
// from the sizes.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernelbench/cuda_source.h"
#include "kernelbench/sym.h"
#include "kforge/tasks/task.h"

namespace kforge::compile::kb {

// A tensor the wrapper sees: one of the task's inputs, or one it allocates.
struct TensorSlot {
  std::string name;  // the task input's name; for an allocation, the wrapper's variable
  tasks::Dtype dtype = tasks::Dtype::Float32;
  std::vector<SymP> shape;
  bool input = false;
  bool zeroed = false;  // torch::zeros(_like), .zero_(), cudaMemset(.., 0, ..)
  int line = 0;         // where it was allocated (source line)
  std::string how;      // "torch::empty_like(a)", for messages
  int base = -1;        // a view (view/reshape) of this slot
};

// A scalar argument of a launch: an integer over the dims, or a float constant written into the
// kernel (a plan passes integers only).
struct LaunchArg {
  enum class Kind { Tensor, Int, Real } kind = Kind::Int;
  int tensor = -1;
  SymP value;
  double real = 0;
  bool is_double = false;
  std::string text;  // as written, for messages
};

struct HostLaunch {
  const Function* kernel = nullptr;
  std::string name;  // as a plan names it: "k", "k<float, 256>"
  std::vector<SymP> grid, block;
  SymP shared_bytes;
  std::vector<LaunchArg> args;
  int line = 0;
};

// An argument forward() passes to the wrapper.
struct CallArg {
  enum class Kind { Tensor, Int, Real } kind = Kind::Tensor;
  int tensor = -1;
  SymP value;
  double real = 0;
};

class HostRun {
 public:
  // `configs`: the task's dims configurations (a condition over the sizes that holds, or fails,
  // at every one of them is taken as such, and said in the notes).
  HostRun(const SourceParts& parts, std::vector<tasks::Dims> configs);
  ~HostRun();

  int add_tensor(TensorSlot slot);
  // Runs host function `function` on `args`; the tensor slots it returns (several for a
  // tuple). Throws SourceRefusal naming the source line and the construct.
  std::vector<int> call(const std::string& function, const std::vector<CallArg>& args);

  std::vector<TensorSlot> tensors;
  std::vector<HostLaunch> launches;
  std::vector<std::pair<int, std::string>> notes;  // (source line, what was assumed)

 private:
  class Interp;
  const SourceParts& parts_;
  std::vector<tasks::Dims> configs_;
};

// The C type a kernel's template argument or a cast names for a dtype ("float", "__half").
std::string c_type(tasks::Dtype d);

}  // namespace kforge::compile::kb
