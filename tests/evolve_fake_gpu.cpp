// kforge-evolve-fake: `kforge evolve`'s loop over the real compiler and archive with the fake GPU
// (fake_gpu.h), for the kill-and-resume test, which needs the loop in a process it can SIGKILL.
//   kforge-evolve-fake DB TASKS_DIR TASK SEED GENERATIONS [RUN]   (RUN: resume it)
// Prints the run's id on its first line.
#include <iostream>

#include "fake_gpu.h"
#include "kforge/evolve/run.h"

int main(int argc, char** argv) {
  if (argc < 6) {
    std::cerr << "usage: kforge-evolve-fake DB TASKS_DIR TASK SEED GENERATIONS [RUN]\n";
    return 2;
  }
  kforge::test::FakeGpu gpu;
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
  kforge::evolve::RunSummary s = kforge::evolve::run_evolution(config, tasks, evaluator, resume);
  std::cout << s.run << "\n" << s.stopped << "\n";
  return 0;
}
