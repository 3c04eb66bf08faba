// A KernelBench answer (a Python file whose ModelNew calls host functions of a load_inline CUDA
// extension) turned into a kforge candidate: device code and a launch plan
// (docs/task-format.md, "KernelBench answers"). The Python is never run: kb_answer.py
// (tasks/kernelbench/, read_kernelbench_answer in kforge/tasks/kernelbench_answer.h) parses it,
// and this reads its CUDA source: host code is removed, and the wrapper forward() calls is run
// symbolically over the task's tensors, each launch becoming a plan launch. What a plan cannot
// say is refused, naming the answer's line and the construct.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/error.h"
#include "kforge/tasks/task.h"

namespace kforge::compile {

// Why an answer does not convert: "ANSWER.py:LINE: what, and why kforge cannot".
class KernelBenchRefused : public Error {
 public:
  using Error::Error;
};

// One of the task's outputs, as the conversion checks the wrapper's result against it.
struct KernelBenchOutput {
  std::string name;
  tasks::Dtype dtype = tasks::Dtype::Float32;
  size_t rank = 0;
  // The reference's output sizes at the task's timed dims, where known without a GPU.
  std::optional<std::vector<int64_t>> timed_sizes;
};

struct KernelBenchCandidate {
  std::string source;              // device code only; the answer's lines where it was one string
  int first_line = 1;              // the answer's line holding the source's first line
  std::string plan;                // JSON
  std::vector<std::string> notes;  // what the conversion changed or assumed
};

// `parsed`: kb_answer.py's reply for `answer_file`. Throws KernelBenchRefused.
KernelBenchCandidate convert_kernelbench_answer(const nlohmann::json& parsed,
                                                const std::string& answer_file,
                                                const tasks::Task& task,
                                                const std::vector<KernelBenchOutput>& outputs);

// The candidate as a kforge answer (docs/answer-format.md): the task on its first line, the
// notes, the CUDA block and the plan, for `kforge compile --answer` and for editing.
std::string kernelbench_markdown(const KernelBenchCandidate& c, const tasks::Task& task,
                                 const std::string& answer_file);

}  // namespace kforge::compile
