// The search loop's CPU test rig: the fake GPU (fake_gpu.h) behind a real Evaluator (real NVRTC
// compiles, a real archive file in a fresh folder), and raw SQL over that archive file (a
// connection of its own: it sees what the evaluator's archive has committed).
#pragma once

#include <memory>
#include <string>

#include "archive_sql.h"
#include "fake_gpu.h"
#include "kforge/archive/sqlite.h"
#include "kforge/compile/plan.h"
#include "kforge/evolve/evaluator.h"
#include "test_util.h"

namespace kforge::test {

struct Rig {
  TempDir dir;
  FakeGpu gpu;
  std::unique_ptr<evolve::Evaluator> evaluator;
  Rig() {
    evolve::EvaluatorOptions eo;
    eo.facts = compile::DeviceFacts::for_arch("sm_90a");
    eo.db = (dir.path() / "a.db").string();
    eo.compiler.workers = 2;
    evaluator = std::make_unique<evolve::Evaluator>(eo, &gpu);
  }
  ArchiveSql& sql() {
    if (!sql_) sql_ = std::make_unique<ArchiveSql>(evaluator->archive());
    return *sql_;
  }
  int64_t count(const std::string& query) { return sql().count(query); }

 private:
  std::unique_ptr<ArchiveSql> sql_;
};

}  // namespace kforge::test
