// Shared by the compile tests: a task, its tensors, and a compiler with a private cache.
#pragma once

#include "kforge/compile/candidate.h"
#include "test_util.h"

namespace kforge::test {

struct CompileFixture {
  tasks::Task task;
  tasks::Reference ref;
  std::vector<compile::TensorInfo> tensors;
  static CompileFixture load(const std::string& spec) {
    auto files = tasks::resolve_tasks(spec, source_dir() / "tasks");
    tasks::Task t = tasks::load_task(files.at(0));
    tasks::Reference r = tasks::Reference::compile(t);
    return {t, r, compile::task_tensors(t, r)};
  }
};

inline compile::CompilerOptions private_cache(const TempDir& dir, bool in_process = true) {
  compile::CompilerOptions o;
  o.cache_dir = (dir.path() / "cache").string();
  o.work_dir = (dir.path() / "nvrtc").string();
  o.in_process = in_process;
  return o;
}

}  // namespace kforge::test
