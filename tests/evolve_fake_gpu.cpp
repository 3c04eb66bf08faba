// kforge-evolve-fake: `kforge evolve`'s loop over the real compiler and archive with the fake GPU
// (fake_gpu.h), for the kill-and-resume tests, which need the loop in a process they can SIGKILL.
//   kforge-evolve-fake DB TASKS_DIR TASK SEED GENERATIONS [RUN]   (RUN: resume it)
// With KFORGE_FAKE_LLM_URL set (an OpenAI-style endpoint, the test's loopback server), the model
// proposes children beside the tuner, its answers cached in KFORGE_FAKE_LLM_CACHE.
// Prints the run's id on its first line.
#include <cstdlib>
#include <iostream>

#include "fake_gpu.h"
#include "kforge/evolve/llm.h"
#include "kforge/evolve/proposer.h"
#include "kforge/evolve/run.h"

namespace {

// The model the loop talks to when the test serves one; none otherwise.
std::unique_ptr<kforge::evolve::LlmProposer> model(const std::string& tasks_dir) {
  const char* url = std::getenv("KFORGE_FAKE_LLM_URL");
  const char* cache = std::getenv("KFORGE_FAKE_LLM_CACHE");
  if (!url || !cache) return nullptr;
  kforge::evolve::Endpoint e;
  e.base_url = url;
  e.model = "scripted";
  e.api_key = "sk-test-not-a-real-key";
  kforge::evolve::RetryPolicy quick;
  quick.max_attempts = 1;
  quick.base_delay = std::chrono::milliseconds(1);
  auto client = std::make_shared<const kforge::evolve::LlmClient>(
      e, quick, nullptr, nullptr, std::make_shared<kforge::evolve::ResponseCache>(cache));
  return std::make_unique<kforge::evolve::LlmProposer>(client, tasks_dir + "/../prompts",
                                                       "a test GPU");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::cerr << "usage: kforge-evolve-fake DB TASKS_DIR TASK SEED GENERATIONS [RUN]\n";
    return 2;
  }
  kforge::test::FakeGpu gpu;
  gpu.busy_ms =
      3;  // each screen and judgment: so that a kill lands between records, not after the last
  kforge::evolve::EvaluatorOptions eo;
  eo.facts = kforge::compile::DeviceFacts::for_arch("sm_90a");
  eo.db = argv[1];
  eo.compiler.workers = 2;
  kforge::evolve::Evaluator evaluator(eo, &gpu);
  kforge::evolve::RunConfig config;
  config.tasks = {argv[3]};
  config.seed = std::stoull(argv[4]);
  config.generations = std::stoi(argv[5]);
  std::optional<int64_t> resume;
  if (argc > 6) resume = std::stoll(argv[6]);
  std::vector<std::shared_ptr<const kforge::tasks::Task>> tasks;
  for (const auto& f : kforge::tasks::resolve_tasks(argv[3], argv[2]))
    tasks.push_back(std::make_shared<const kforge::tasks::Task>(kforge::tasks::load_task(f)));
  auto llm = model(argv[2]);
  if (llm) {
    config.llm_children = 3;
    config.operators = {1, 1, 1};
  }
  kforge::evolve::RunSummary s =
      kforge::evolve::run_evolution(config, tasks, evaluator, resume, {}, llm.get());
  std::cout << s.run << "\n" << s.stopped << "\n";
  return 0;
}
