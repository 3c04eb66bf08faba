// KernelBench answers (tests/kernelbench/answers/) converted as `kforge compile --kernelbench`
// converts them: read by kforge's confined Python helper, then turned into a candidate for a
// shipped task, whose outputs come from its reference as the command gets them (names, dtypes,
// ranks, and sizes at the timed dims where the meta device tells).
#pragma once

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "compile_test_util.h"
#include "kforge/compile/kernelbench_answer.h"
#include "kforge/tasks/check.h"
#include "kforge/tasks/kernelbench_answer.h"

namespace kforge::test {

// Whether a Python 3 is there to parse answers (any Python: only its ast module is used).
inline bool has_python3() {
  return std::system("python3 -c 'import ast' > /dev/null 2>&1") == 0;
}

#define REQUIRE_PYTHON3() \
  if (!has_python3())     \
  GTEST_SKIP() << "no python3: kforge reads KernelBench answers with Python's ast"

inline std::string answer_path(const std::string& name) {
  return (source_dir() / "tests/kernelbench/answers" / name).string();
}

inline std::vector<compile::KernelBenchOutput> kernelbench_outputs(const CompileFixture& f) {
  std::vector<tasks::OutputInfo> infos = tasks::describe_outputs(f.task, f.ref);
  auto shapes = tasks::output_shapes(f.task, f.ref, f.task.dims);
  std::vector<compile::KernelBenchOutput> out;
  for (size_t k = 0; k < infos.size(); ++k) {
    compile::KernelBenchOutput o{infos[k].name, infos[k].dtype, infos[k].rank, std::nullopt};
    if (shapes && k < shapes->size()) o.timed_sizes = (*shapes)[k].sizes;
    out.push_back(o);
  }
  return out;
}

struct ConvertedAnswer {
  CompileFixture fixture;
  compile::KernelBenchCandidate candidate;
  nlohmann::json plan;
};

// Throws compile::KernelBenchRefused when the answer does not convert.
inline ConvertedAnswer convert_answer(const std::string& name, const std::string& task) {
  CompileFixture f = CompileFixture::load(task);
  nlohmann::json parsed = tasks::read_kernelbench_answer(answer_path(name));
  compile::KernelBenchCandidate c =
      compile::convert_kernelbench_answer(parsed, name, f.task, kernelbench_outputs(f));
  nlohmann::json plan = nlohmann::json::parse(c.plan);
  return {std::move(f), std::move(c), std::move(plan)};
}

}  // namespace kforge::test
