// Prompt templates: loaded at run time, checked at start, filled from the task and the archive.
#include <gtest/gtest.h>

#include "kforge/common/files.h"
#include "kforge/archive/sqlite.h"
#include "kforge/common/hash.h"
#include "kforge/evolve/prompt.h"
#include "test_util.h"

namespace {

using namespace kforge::evolve;
using kforge::test::TempDir;

std::string prompts_dir() { return (kforge::test::source_dir() / "prompts").string(); }

struct Fixture {
  kforge::tasks::Task task;
  kforge::tasks::Reference ref;
  static Fixture load(const std::string& spec) {
    auto t = kforge::tasks::load_task(kforge::tasks::resolve_tasks(spec, kforge::test::source_dir() / "tasks").at(0));
    return {t, kforge::tasks::Reference::compile(t)};
  }
};

PromptInputs inputs(const Fixture& f, kforge::archive::Archive* ar = nullptr) {
  PromptInputs in;
  in.task = &f.task;
  in.reference = &f.ref;
  in.archive = ar;
  in.device = "NVIDIA H200 (sm_90a)";
  in.answer_format = load_answer_format(prompts_dir());
  return in;
}

TEST(Prompt, ShippedTemplatesLoadAndUseOnlyKnownPlaceholders) {
  PromptTemplates t = PromptTemplates::load(prompts_dir());
  for (auto kind : {PromptKind::Translate, PromptKind::Optimize, PromptKind::Crossover, PromptKind::RepairCompile, PromptKind::RepairWrong}) {
    auto used = t.placeholders(kind);
    EXPECT_TRUE(used.count("answer_format")) << prompt_kind_name(kind) << " must quote the answer format";
    EXPECT_TRUE(used.count("task_reference")) << prompt_kind_name(kind);
  }
  EXPECT_TRUE(t.placeholders(PromptKind::Crossover).count("second_parent_source"));
  EXPECT_TRUE(t.placeholders(PromptKind::RepairWrong).count("failure_evidence"));
}

TEST(Prompt, TranslateIsFilledFromTheTask) {
  Fixture f = Fixture::load("smoke/softmax");
  std::string p = PromptTemplates::load(prompts_dir()).render(PromptKind::Translate, prompt_context(inputs(f)));
  EXPECT_NE(p.find("torch.softmax(x, dim=-1)"), std::string::npos);
  EXPECT_NE(p.find("input `x`: float32 [4096, 4096]"), std::string::npos) << p.substr(0, 800);
  EXPECT_NE(p.find("B=37, N=1000"), std::string::npos);
  EXPECT_NE(p.find("# Answer format"), std::string::npos);
  // What the model is held to: the tolerance, the math mode, the compile flags, what is timed, the
  // inputs' values.
  EXPECT_NE(p.find("max(tol * rms(reference), 8 * eager's own largest error); here `out` tol = 0.0001"), std::string::npos)
      << p;
  EXPECT_NE(p.find("TF32 is off"), std::string::npos);
  EXPECT_NE(p.find("without --use_fast_math"), std::string::npos);
  EXPECT_NE(p.find("L2 cache flushed"), std::string::npos);
  EXPECT_NE(p.find("values randn"), std::string::npos);
  EXPECT_EQ(p.find("{{"), std::string::npos) << "an unfilled placeholder";
}

TEST(Prompt, KindsThatNeedAParentSaySo) {
  Fixture f = Fixture::load("smoke/softmax");
  try {
    PromptTemplates::load(prompts_dir()).render(PromptKind::Optimize, prompt_context(inputs(f)));
    FAIL();
  } catch (const kforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs --parent"), std::string::npos) << e.what();
  }
}

TEST(Prompt, UnknownPlaceholderAndMissingTemplateFailAtLoad) {
  TempDir dir;
  for (const char* k : {"translate", "optimize", "crossover", "repair_compile", "repair_wrong", "ideas", "idea"})
    dir.write(std::string("p/") + k + ".md", "Task {{task_id}}\n");
  EXPECT_NO_THROW(PromptTemplates::load((dir.path() / "p").string()));
  auto bad = dir.write("p/optimize.md", "line one\nTask {{task_id}} with {{parent_sauce}}\n");
  try {
    PromptTemplates::load((dir.path() / "p").string());
    FAIL();
  } catch (const kforge::InputError& e) {
    EXPECT_EQ(e.file(), bad.string());
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.field(), "{{parent_sauce}}");
  }
  ::unlink(bad.c_str());
  try {
    PromptTemplates::load((dir.path() / "p").string());
    FAIL();
  } catch (const kforge::InputError& e) {
    EXPECT_NE(e.file().find("optimize.md"), std::string::npos);
    EXPECT_NE(e.problem().find("missing prompt template"), std::string::npos);
  }
}

// A kernel of `task` in the archive with one evaluation (of run `run`, when given).
kforge::archive::CandidateId add_kernel(kforge::archive::Archive& ar, kforge::archive::TaskId task, const std::string& name,
                                        kforge::archive::EvaluationRecord e, std::optional<int64_t> run = std::nullopt) {
  kforge::archive::NewCandidate c;
  c.task = task;
  c.source = "__global__ void " + name + "() {}\n";
  c.identity = kforge::content_hash(c.source);
  if (run) c.run = kforge::archive::RunId{*run};
  e.harness_version = 1;
  return ar.add_candidate(c, std::nullopt, {e});
}

TEST(Prompt, OptimizeAndRepairUseTheParentAndRetrieval) {
  TempDir dir;
  Fixture softmax = Fixture::load("smoke/softmax");
  Fixture logsm = Fixture::load("level1/log_softmax");
  auto ar = kforge::archive::Archive::open((dir.path() / "a.db").string());
  auto t1 = ar.upsert_task(softmax.task);
  auto t2 = ar.upsert_task(logsm.task);
  kforge::archive::EvaluationRecord wrong;
  wrong.outcome = "wrong_result";
  wrong.evidence = {{"first_bad_index", 4095}, {"max_abs_error", 0.5}};
  auto pid = add_kernel(ar, t1, "softmax_rows_parent", wrong);
  kforge::archive::EvaluationRecord ok;
  ok.outcome = "correct";
  ok.time_ms = 2.0;
  add_kernel(ar, t2, "log_softmax_rows", ok);
  PromptInputs in = inputs(softmax, &ar);
  in.parent = pid;
  PromptTemplates t = PromptTemplates::load(prompts_dir());
  std::string opt = t.render(PromptKind::Optimize, prompt_context(in));
  EXPECT_NE(opt.find("softmax_rows_parent"), std::string::npos);
  EXPECT_NE(opt.find("log_softmax_rows"), std::string::npos) << "a similar task's kernel is retrieved";
  std::string fix = t.render(PromptKind::RepairWrong, prompt_context(in));
  EXPECT_NE(fix.find("first_bad_index"), std::string::npos);
  EXPECT_NE(fix.find("wrong_result"), std::string::npos);
  // Before any candidate of the task was timed, a translation says so; after one was (any
  // candidate of this task version), it quotes eager, scripted and the roofline floor.
  in.parent.reset();
  EXPECT_NE(t.render(PromptKind::Translate, prompt_context(in)).find("PyTorch eager time: not measured yet"),
            std::string::npos);
  kforge::archive::EvaluationRecord measured;
  measured.outcome = "correct";
  measured.time_ms = 0.05, measured.eager_ms = 0.08, measured.scripted_ms = 0.07, measured.roofline_fraction = 0.5;
  auto tid = add_kernel(ar, t1, "softmax_timed", measured);
  std::string tr = t.render(PromptKind::Translate, prompt_context(in));
  EXPECT_NE(tr.find("PyTorch eager time: 0.08 ms, TorchScript-scripted 0.07 ms (measured beside candidate " +
                    std::to_string(tid.value)),
            std::string::npos)
      << tr.substr(0, 1500);
  EXPECT_NE(tr.find("Roofline floor: 0.025 ms"), std::string::npos);
  // A run's own measurements are left out of its prompts (a resumed run asks the same).
  ar.db().prepare("INSERT INTO runs (config) VALUES ('{}')").run();
  int64_t run = ar.db().last_insert_id();
  measured.eager_ms = 0.5;
  add_kernel(ar, t1, "softmax_this_run", measured, run);
  in.run = run;
  EXPECT_NE(t.render(PromptKind::Translate, prompt_context(in)).find("PyTorch eager time: 0.08 ms"), std::string::npos);
  in.run.reset();
  EXPECT_NE(t.render(PromptKind::Translate, prompt_context(in)).find("PyTorch eager time: 0.5 ms"), std::string::npos);
}

}  // namespace
