// `kforge evolve`: the search loop (docs/evolve.md). Per task a population of correct kernels,
// spread over islands; each generation picks parents (the best, a cell's elite, or at random),
// proposes children, screens them on the GPU, judges the fastest in full, admits a new best, and
// records every candidate with its lineage. The offline proposer is the autotuner (tuner.h): a
// child is its parent's code at another point of its tune space.
//
// Resume is replay: the run starts again from its recorded config and random seed, and every
// screen and judgment already recorded for a candidate on this GPU at this harness version is read
// back instead of measured, so a run killed at any point and resumed records what the
// uninterrupted run would have, none of it twice.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kforge/evolve/evaluator.h"
#include "kforge/evolve/proposer.h"
#include "kforge/evolve/tuner.h"
#include "kforge/tasks/task.h"

namespace kforge::evolve {

struct RunConfig {
  std::vector<std::string> tasks;  // suites, task files or names
  uint64_t seed = 1;               // the run's random streams
  std::string model;               // the LLM proposer's "provider:model" or "batch:DIR"; "" offline
  std::string
      llm_config;  // an LLM config file (docs/llm-config.md): the ensemble instead of `model`
  // Budgets; 0 means none. Evaluations are screens plus full judgments.
  int64_t evaluations = 0, task_evaluations = 0;
  double minutes = 0, gpu_minutes = 0, task_gpu_minutes = 0;
  int64_t llm_calls = 0, llm_tokens = 0;  // per run: requests answered, tokens in plus out
  double llm_dollars = 0;       // per run: the answers' list price (the LLM config's prices)
  int64_t task_llm_tokens = 0;  // per task
  double task_llm_dollars = 0;
  int generations = 8;        // per task
  double target_speedup = 0;  // per task, over eager: reached, the task stops
  int children = 8;           // proposals per task and generation, spread over the islands
  int judge_top = 2;  // of a generation's screened children, at most this many judged in full
  int islands = 2;
  // Rounds a task's proposals run ahead of its oldest round not yet committed (docs/evolve.md, "The
  // steady state"); 0: chosen at the run's start from the model's concurrency, and recorded.
  int lookahead = 0;
  int migration_interval = 3;  // generations between migrations (each island's best to the next)
  double select_best = 0.5, select_elite = 0.3;  // the rest: a random member
  bool admit = true;                             // admission of every new best
  // With an LLM proposer: its children per task and generation (translate while a task has no
  // correct kernel, then optimize a selected parent), and repairs of a failed child, at most
  // `repair_attempts` deep.
  int llm_children = 2;
  int repair_attempts = 1;
  // The mix of operators for a child that is not a repair or a translation (weights): optimize one
  // parent, crossover of two parents of different code, ideas (`ideas_count` ideas in words, then
  // one child implementing each).
  struct Operators {
    double optimize = 0.5, crossover = 0.25, ideas = 0.25;
  } operators;
  int ideas_count = 3;
  // Profile feedback: a parent's Nsight Compute profile (measured once, when `ncu` is installed
  // where the run judges) is quoted in the prompts that optimize it.
  bool profile = true;
  TunerOptions tuner;
  // The GPU facts the prompts quote (name, L2, spec and measured bandwidth, matmul peaks), recorded
  // at the run's start: a resumed run, on this machine or another of its kind, quotes the same, so
  // its prompts (and the answers cached under them) are the same. Null until an LLM run starts.
  nlohmann::json target = nullptr;
  // A batch folder's choices (--batch-model, --batch-wait), recorded with the run so that a resumed
  // run answers and waits as it began (the flags given again override them). Like `target`, not a
  // setting a config file gives.
  std::string batch_model;
  std::optional<double> batch_wait_s;

  nlohmann::json to_json() const;
  static RunConfig from_json(const nlohmann::json& j);  // InputError naming the field

 private:
  nlohmann::json to_json_settings() const;
};

// Reads a run config file (TOML; every key optional, docs/evolve.md lists them).
RunConfig load_run_config(const std::string& path);

// A task's state as the loop sees it, for progress lines and the summary.
struct TaskStatus {
  std::string task;
  int generation = 0;
  int64_t screened = 0, judged = 0, correct = 0, failed = 0;
  std::optional<int64_t>
      best;  // candidate id of the best admitted (or, without admission, correct) kernel
  std::optional<double> best_ms, roofline_fraction;
  BaselineTimes baselines;  // the best kernel's baselines by kind (absent kinds: why)
  std::string stopped;      // why it stopped ("" while it runs)
};

// RunSummary::stopped when a batch folder has not answered yet: the run pauses (recorded as
// interrupted) and `--resume` goes on once the answers are there.
inline constexpr const char* kWaitingForAnswers = "waiting for the model's answers";

struct RunSummary {
  int64_t run = 0;
  std::vector<TaskStatus> tasks;
  int64_t evaluations = 0;       // measured in this process
  int64_t reused = 0;            // read back from the archive instead of measured
  double wall_s = 0, gpu_s = 0;  // this process's
  std::string stopped;           // why the run ended
  LlmSpent llm;                  // this process's requests (cached answers included)
};

// What the loop did, as LoopHooks::on_event gets it; to_json() is its --log-json line.
struct LoopEvent {
  enum class Kind {
    Screen,     // a child screened on the GPU (its candidate id comes when it is recorded)
    Judge,      // a child judged in full (and admitted, when it would be the best)
    Profile,    // a parent's Nsight Compute profile
    Duplicate,  // a child with the identity of one the run screened: takes its screen
  };
  Kind kind = Kind::Screen;
  std::string task;
  int generation = 0, island = 0;        // screen, judge
  std::optional<int64_t> candidate;      // judge, profile: the archive id
  std::string identity;                  // screen, duplicate
  nlohmann::json tunables = nullptr;     // screen, judge
  std::string outcome;                   // screen, judge
  std::optional<double> ms;              // screen: its median; judge: the time
  bool admitted = false;                 // judge
  std::string summary;                   // judge: the verdict's (cut at 200 characters)
  std::optional<std::string> admission;  // judge: admission's summary, when it ran (cut at 300)
  double seconds = 0;                    // profile: how long it took
  std::string error;                     // profile: why there is none ("" when there is)
  // The run's wall clock, GPU time and evaluations so far, when it happened.
  double t = 0, gpu_s = 0;
  int64_t evaluations = 0;

  nlohmann::json to_json() const;
};
std::string to_string(LoopEvent::Kind kind);  // "screen", "judge", "profile", "duplicate"

struct LoopHooks {
  std::function<void(const TaskStatus&)> on_progress;  // after each task's generation
  // Every screen, judgment, profile and duplicate, with the task's status before the event counts
  // in it (the loop never prints: the command decides what to show and log).
  std::function<void(const LoopEvent&, const TaskStatus&)> on_event;
  std::atomic<int>* stop = nullptr;  // 1: drain what is in flight and end; checked between steps
};

// Starting kernels for a task: its shipped seed (tasks/<suite>/seeds/<name>.md) and the archive's
// correct kernels of this task version (distinct code, the fastest first), made outside `run` (a
// resumed run starts from what it started from the first time).
std::vector<Proposal> starting_population(const std::shared_ptr<const tasks::Task>& task,
                                          archive::Archive& archive, size_t from_archive = 4,
                                          std::optional<int64_t> run = std::nullopt);

// Runs (or, with `resume`, resumes) a run over `tasks`. The evaluator's GPU does the measuring;
// `llm`, when given, proposes children beside the tuner.
RunSummary run_evolution(const RunConfig& config,
                         const std::vector<std::shared_ptr<const tasks::Task>>& tasks,
                         Evaluator& evaluator, std::optional<int64_t> resume,
                         const LoopHooks& hooks = {}, LlmProposer* llm = nullptr);

}  // namespace kforge::evolve
