// The candidate corpora compile and plan-check on the CPU (their GPU verdicts are in tests/gpu),
// and `kforge corpus`'s library tells an answer's problems from kforge's own.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "corpus_util.h"
#include "fake_gpu.h"
#include "kforge/common/error.h"
#include "kforge/evolve/corpus.h"
#include "kforge/verify/judge.h"
#include "kforge/verify/outcome.h"

using namespace kforge;
using namespace kforge::test;

TEST(Corpus, ExploitsCompileAndTheirManifestNamesRealOutcomes) {
  TempDir dir;
  compile::Compiler compiler(private_cache(dir));
  std::string folder = (source_dir() / "tests/gpu/exploits").string();
  nlohmann::json manifest = nlohmann::json::parse(read_file(folder + "/manifest.json").value());
  std::vector<std::string> files = answers_in(folder);
  EXPECT_EQ(files.size(), manifest["kernels"].size())
      << "every exploit is in the manifest, and only those";
  for (const std::string& path : files) {
    std::string name = path.substr(path.rfind('/') + 1);
    ASSERT_TRUE(manifest["kernels"].contains(name)) << name << " is not in manifest.json";
    for (const auto& section : {"kernels", "without_sanitizer"}) {
      if (!manifest[section].contains(name)) continue;
      for (const auto& o : manifest[section][name])
        EXPECT_TRUE(verify::outcome_from_string(o.get<std::string>()))
            << name << ": unknown outcome " << o;
    }
    CheckedAnswer c = check_answer_file(path, compile::DeviceFacts::for_arch("sm_90a"), compiler);
    // Exploits meant to stop before the GPU must stop here, with that outcome; the rest must pass.
    auto expected = manifest["kernels"][name].get<std::vector<std::string>>();
    std::string before_gpu =
        std::string(verify::to_string(verify::verdict_from_report(c.report).outcome));
    const nlohmann::json& at_judge = manifest["plan_error_at_the_judge"];
    bool stops_here = (expected == std::vector<std::string>{"compile_error"} ||
                       expected == std::vector<std::string>{"plan_error"}) &&
                      std::find(at_judge.begin(), at_judge.end(), name) == at_judge.end();
    if (stops_here) {
      EXPECT_FALSE(c.report.ok()) << name << " should be stopped before the GPU";
      EXPECT_EQ(before_gpu, expected.front()) << name;
    } else {
      EXPECT_TRUE(c.report.ok()) << name << ": "
                                 << (c.report.errors.empty() ? "" : c.report.errors.front());
    }
  }
  for (const auto& name : manifest["screen_passes"])  // read by tests/gpu/test_loop_exploits.cpp
    EXPECT_TRUE(manifest["kernels"].contains(name.get<std::string>()))
        << name << " (screen_passes) is not an exploit";
}

// ---- kforge corpus (evolve/corpus.h): an answer's own problem is data, kforge's is an exception

namespace {

struct Results : evolve::CorpusObserver {
  std::vector<evolve::CorpusResult> got;
  void on_result(size_t, const evolve::CorpusResult& r) override { got.push_back(r); }
};

// A corpus folder: the relu seed (judged), an answer naming no task and one naming a task that
// does not exist (neither judged: their own problems).
std::vector<evolve::CorpusEntry> three_answers(const TempDir& dir) {
  std::string seed = read_file((source_dir() / "tasks/smoke/seeds/relu.md").string()).value();
  std::string body = seed.substr(seed.find('\n') + 1);
  dir.write("answers/a_relu.md", seed);
  dir.write("answers/b_no_task_line.md", body);
  dir.write("answers/c_unknown_task.md", "<!-- task: smoke/no_such_task -->\n" + body);
  return evolve::collect_corpus({(dir.path() / "answers").string()}, "correct", false);
}

evolve::EvaluatorOptions corpus_evaluator(const TempDir& dir) {
  evolve::EvaluatorOptions eo;
  eo.facts = compile::DeviceFacts::for_arch("sm_90a");
  eo.db = (dir.path() / "a.db").string();
  eo.compiler = private_cache(dir, false);
  eo.compiler.use_cache = false;  // every answer reaches the NVRTC workers
  return eo;
}

}  // namespace

TEST(Corpus, AnAnswersOwnProblemIsNotJudgedAndTheRestIsJudged) {
  TempDir dir;
  std::vector<evolve::CorpusEntry> entries = three_answers(dir);
  ASSERT_EQ(entries.size(), 3u);
  FakeGpu gpu;
  evolve::Evaluator evaluator(corpus_evaluator(dir), &gpu);
  evolve::CorpusOptions co;
  co.tasks_dir = (source_dir() / "tasks").string();
  evolve::Corpus corpus(entries, co, evaluator);
  EXPECT_EQ(corpus.tasks().size(), 1u);
  Results r;
  corpus.judge(r);
  ASSERT_EQ(r.got.size(), 3u);
  EXPECT_TRUE(r.got[0].not_judged.empty()) << r.got[0].not_judged;
  EXPECT_EQ(r.got[0].outcome, "correct");
  EXPECT_TRUE(r.got[0].as_expected);
  EXPECT_NE(r.got[1].not_judged.find("no `<!-- task: suite/name -->` line"), std::string::npos)
      << r.got[1].not_judged;
  EXPECT_NE(r.got[2].not_judged.find("no_such_task"), std::string::npos) << r.got[2].not_judged;
  EXPECT_EQ(gpu.verified, 1);
}

// A harness bug (here: an NVRTC worker that does not start) reaches the caller as an exception,
// as `kforge corpus` then reports it (exit 4), never as one "not judged" line per answer.
TEST(Corpus, AHarnessBugIsAnExceptionNeverANotJudgedLine) {
  TempDir dir;
  std::vector<evolve::CorpusEntry> entries = three_answers(dir);
  FakeGpu gpu;
  evolve::EvaluatorOptions eo = corpus_evaluator(dir);
  eo.compiler.worker_path = "/bin/false";  // exits at once, without its hello
  evolve::Evaluator evaluator(eo, &gpu);
  evolve::CorpusOptions co;
  co.tasks_dir = (source_dir() / "tasks").string();
  evolve::Corpus corpus(entries, co, evaluator);
  Results r;
  try {
    corpus.judge(r);
    FAIL() << "the broken worker was swallowed";
  } catch (const kforge::UsageError& e) {
    FAIL() << "a harness bug as a usage error: " << e.what();
  } catch (const kforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not start"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(r.got.empty()) << "the first answer reached a result: " << r.got.front().not_judged;
  EXPECT_EQ(gpu.verified, 0);
}
