#include "kforge/tasks/transform.h"

#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/jit.h>

#include <map>
#include <memory>
#include <mutex>

#include "kforge/tasks/generator.h"
#include "kforge/tasks/math_mode.h"
#include "kforge/tasks/reference.h"

namespace kforge::tasks {
namespace {

constexpr const char* kFunction = "kforge_input_transform";

// TorchScript's message, cut to its first lines (the excerpt of the source included).
std::string first_lines(const std::string& msg, int max_lines = 12) {
  std::string out;
  int lines = 0;
  for (char c : msg) {
    if (c == '\n' && ++lines >= max_lines) break;
    out += c;
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

bool is_low_precision(Dtype d) {
  return d == Dtype::Float16 || d == Dtype::BFloat16;
}

// Compiled transforms, by source: tasks are copied (admission's unseen dims) and reloaded (GPU
// workers parse the parent's copy), so a transform is compiled once per process, not per task.
class TransformCache {
 public:
  std::shared_ptr<torch::jit::CompilationUnit> get(const InputSpec& in, const std::string& file) {
    std::string body = transform_function(in);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = units_.find(body); it != units_.end()) return it->second;
    }
    std::string source = rewrite_functional(body, file, std::nullopt);
    std::shared_ptr<torch::jit::CompilationUnit> unit;
    try {
      unit = torch::jit::compile(prelude_source() + source);
    } catch (const std::exception& e) {
      std::string msg = first_lines(e.what());
      msg.erase(0, msg.find_first_not_of(" \n"));
      throw UsageError("does not compile as TorchScript:\n" + msg);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (units_.size() >= 256) units_.clear();  // a process sent ever new tasks stays bounded
    return units_.emplace(body, unit).first->second;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<torch::jit::CompilationUnit>> units_;
};

TransformCache& cache() {
  static TransformCache* c = new TransformCache;  // never destroyed: LibTorch may be gone at exit
  return *c;
}

std::string shape_text(c10::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

}  // namespace

uint32_t draw_stream(size_t index, size_t j) {
  return static_cast<uint32_t>(index + (j << 16));
}

std::string transform_function(const InputSpec& in) {
  std::string params = in.name + ": Tensor";
  for (const InputSpec& d : in.draws) params += ", " + d.name + ": Tensor";
  std::string text = "def ";  // (appended, not chained: GCC 12 warns falsely on `a + b + ...`)
  text.append(kFunction).append("(").append(params).append(") -> Tensor:\n    return ");
  return text.append(in.transform).append("\n");
}

void compile_transform(const InputSpec& in, const std::string& file) {
  (void)cache().get(in, file);
}

torch::Tensor apply_transform(const Task& task, size_t index,
                              const std::vector<torch::Tensor>& drawn) {
  const InputSpec& in = task.inputs.at(index);
  const std::string where = task.file.string() + ": inputs[" + std::to_string(index) + "] (" +
                            in.name + ").transform '" + in.transform + "'";
  std::shared_ptr<torch::jit::CompilationUnit> unit;
  try {
    unit = cache().get(in, task.file.string());
  } catch (const InputError& e) {
    throw UsageError(where + ": " + e.problem());
  } catch (const UsageError& e) {
    throw UsageError(where + ": " + e.what());
  }
  c10::IValue result;
  try {
    // Always the same executor setting and math mode: an input is a function of its seed alone
    // (the judge's own optimiser setting, or a fused kernel after some runs, must not change it).
    torch::NoGradGuard no_grad;
    torch::jit::GraphOptimizerEnabledGuard optimizer(false);
    MathModeGuard math(false);
    result = unit->get_function(kFunction)(std::vector<c10::IValue>(drawn.begin(), drawn.end()));
  } catch (const std::exception& e) {
    throw UsageError(where + " failed: " + first_lines(e.what(), 4));
  }
  torch::Tensor t = result.toTensor();
  const torch::Tensor& own = drawn.at(0);
  Dtype want = is_low_precision(in.dtype) ? Dtype::Float32 : in.dtype;
  std::optional<Dtype> got = from_scalar_type(t.scalar_type());
  if (t.sizes() != own.sizes() || got != want || t.device() != own.device())
    throw UsageError(
        where + " returns " +
        (got ? std::string(dtype_name(*got)) : std::string(c10::toString(t.scalar_type()))) + " " +
        shape_text(t.sizes()) + " on " + t.device().str() + "; the input is " +
        std::string(dtype_name(want)) + " " + shape_text(own.sizes()) + " on " +
        own.device().str() +
        (want != in.dtype ? " (float16/bfloat16 inputs are computed in float32)" : ""));
  if (want != in.dtype) t = t.to(to_scalar_type(in.dtype));
  return t.contiguous();
}

}  // namespace kforge::tasks
