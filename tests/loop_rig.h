// The search loop's CPU test rig: the fake GPU (fake_gpu.h) behind a real Evaluator (real NVRTC
// compiles, a real archive file in a fresh folder), and a count() over that archive.
#pragma once

#include <memory>
#include <string>

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
  archive::Database& db() { return evaluator->archive().db(); }
  int64_t count(const std::string& sql) {
    archive::Statement s = db().prepare(sql);
    s.step();
    return s.integer(0);
  }
};

}  // namespace kforge::test
