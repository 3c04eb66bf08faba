// `kforge evolve SUITE|TASK...`: the search loop (docs/evolve.md), and the `kforge report RUN`
// command (its markdown: report_cmd.cpp).
#include <unistd.h>
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>

#include "baseline_columns.h"
#include "candidate_input.h"
#include "command_list.h"
#include "commands.h"
#include "compiled_baselines.h"
#include "json_output.h"
#include "kforge/archive/location.h"
#include "kforge/common/secrets.h"
#include "kforge/common/strings.h"
#include "kforge/evolve/batch.h"
#include "kforge/evolve/evaluator.h"
#include "kforge/evolve/remote_gpu.h"
#include "kforge/evolve/run.h"
#include "kforge/evolve/run_setup.h"
#include "kforge/verify/driver.h"
#include "progress.h"
#include "report_cmd.h"
#include "table.h"

namespace kforge::cli {
namespace {

using nlohmann::json;

struct EvolveArgs {
  std::vector<std::string> tasks;
  std::string config_file, tasks_dir, db, llm = "auto", log_json, model, llm_config;
  std::string batch_model;  // with --model batch:DIR: the requests' model and format
  std::optional<double> batch_wait_s;
  std::optional<int64_t> resume;
  std::optional<uint64_t> seed;
  std::optional<int> generations, lookahead, jobs;
  std::optional<int64_t> budget_evaluations;
  std::optional<double> budget_minutes, target_speedup;
  bool no_admit = false, no_compile = false, no_max_autotune = false, dry_run = false, json = false;
  // Several GPUs (docs/scale.md): --gpus, or --workers started by --worker-command.
  std::string gpus, worker_command, worker_host = "127.0.0.1";
  int workers = 0;
  double worker_deadline_s = 600;
};

std::atomic<int> g_stop{0};
std::atomic<int64_t> g_first_signal_ms{0};

// The first SIGINT or SIGTERM ends the run as it stands; a second one, a second later or more, ends
// it at once (everything recorded is committed). Sooner than that it is the same event twice:
// `timeout`, a terminal's Ctrl-C and Slurm's scancel signal the process and then its whole group.
extern "C" void on_interrupt(int) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  int64_t ms = int64_t(now.tv_sec) * 1000 + now.tv_nsec / 1000000 + 1;  // never 0
  int64_t first = 0;
  g_stop.fetch_add(1);
  if (!g_first_signal_ms.compare_exchange_strong(first, ms) && ms - first >= 1000) std::_Exit(130);
}

std::string status_line(const evolve::TaskStatus& s) {
  std::string best = s.best_ms ? fixed(*s.best_ms, 4) + " ms" : "none yet";
  if (std::string x = all_speedups(s.baselines, s.best_ms); !x.empty()) best += ", " + x;
  if (s.roofline_fraction) best += ", " + fixed(100 * *s.roofline_fraction, 0) + "% of roofline";
  return s.task + ": generation " + std::to_string(s.generation) + ", best " + best + "; " +
         std::to_string(s.screened) + " screened, " + std::to_string(s.judged) + " judged (" +
         std::to_string(s.correct) + " correct, " + std::to_string(s.failed) + " failed)";
}

// The live line, the run's budget first (a narrow terminal cuts the end):
// "45 evals, 0:33/8:00, GPU 96% | g2 level1/softmax 1.71x eager 1.20x best 80%, 3 ok 0 failed"
// (x eager and x best only: one line).
std::string live_line(const evolve::TaskStatus& s, const evolve::LoopEvent& e,
                      const evolve::RunConfig& c) {
  auto clock = [](double sec) {
    int t = static_cast<int>(sec);
    return std::to_string(t / 60) + ":" + (t % 60 < 10 ? "0" : "") + std::to_string(t % 60);
  };
  std::string best = "no best yet";
  if (std::string x = short_speedups(s.baselines, s.best_ms, " "); !x.empty()) best = x;
  if (s.roofline_fraction) best += " " + fixed(100 * *s.roofline_fraction, 0) + "%";
  double t = e.t;
  std::string evals =
      std::to_string(e.evaluations) + (c.evaluations ? "/" + std::to_string(c.evaluations) : "");
  std::string wall = clock(t) + (c.minutes > 0 ? "/" + clock(60 * c.minutes) : "");
  return evals + " evals, " + wall + ", GPU " + (t > 0 ? fixed(100 * e.gpu_s / t, 0) : "0") +
         "% | g" + std::to_string(s.generation) + " " + s.task + " " + best + ", " +
         std::to_string(s.correct) + " ok " + std::to_string(s.failed) + " failed";
}

// The run's choices among the flags.
evolve::RunRequest request_of(const EvolveArgs& a) {
  evolve::RunRequest r;
  r.resume = a.resume;
  r.config_file = a.config_file;
  r.tasks = a.tasks;
  r.seed = a.seed;
  r.model = a.model, r.llm_config = a.llm_config;
  r.offline = a.llm == "none";
  r.generations = a.generations;
  r.lookahead = a.lookahead;
  r.evaluations = a.budget_evaluations;
  r.minutes = a.budget_minutes, r.target_speedup = a.target_speedup;
  r.no_admit = a.no_admit;
  return r;
}

// The number flags keep the bounds of the keys they override (one rule, the run config's), and
// say so before any work: UsageError naming the flag.
void check_number_flags(const EvolveArgs& a) {
  try {
    evolve::check_request_numbers(request_of(a));
  } catch (const InputError& e) {
    std::string flag = e.field();
    std::replace(flag.begin(), flag.end(), '.', '-');
    std::replace(flag.begin(), flag.end(), '_', '-');
    throw UsageError("--" + flag + ": " + e.problem());
  }
}

// What the batch folder of --model batch:DIR holds: the requests' format and the answers'.
struct BatchFormat {
  std::string requests, answers;
};
BatchFormat batch_format(const std::string& batch_model) {
  if (!batch_model.empty() &&
      evolve::endpoint_from_spec(batch_model).provider == evolve::Provider::Anthropic)
    return {"Anthropic Message Batches request lines (custom_id, params) for " + batch_model,
            "Message Batches results lines"};
  return {"OpenAI Batch API input lines" + (batch_model.empty() ? "" : " for " + batch_model),
          "Batch API output lines"};
}

// This process's environment without the variables that hold secrets (an LLM's API key stays with
// the parent): the GPU workers' launchers (srun, ssh, kubectl) need theirs.
std::vector<std::string> worker_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e, name = entry.substr(0, entry.find('='));
    if (!is_secret_name(name) && name != "KFORGE_WORKER_TOKEN")
      env.push_back(entry);  // the pool sets its own
  }
  return env;
}

// The GPU workers of --gpus (a `kforge gpu-worker` per listed GPU of this machine; one listed twice
// shares it) or of --worker-command (--workers of them, each started by the command through sh, its
// {address}, {worker} and {token} filled in).
// `here`: this machine has a GPU (its GPU 0 must then be of the workers' kind).
std::unique_ptr<evolve::RemoteGpu> start_gpu_workers(const EvolveArgs& a, bool here) {
  evolve::RemoteGpuOptions o;
  o.deadline = std::chrono::milliseconds(static_cast<int64_t>(1000 * a.worker_deadline_s));
  o.pool.host = a.worker_host;
  o.pool.env = worker_environment();
  if (!a.gpus.empty()) {
    int count = static_cast<int>(verify::list_devices().size());
    std::vector<std::string> list;
    if (a.gpus == "all")
      for (int i = 0; i < count; ++i) list.push_back(std::to_string(i));
    else
      list = split(a.gpus, ',');
    for (const std::string& g : list)
      if (g.empty() || g.size() > 4 ||
          !std::all_of(g.begin(), g.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) ||
          std::stoi(g) >= count)
        throw UsageError("--gpus " + a.gpus + ": '" + g + "' is not a GPU of this machine (0 to " +
                         std::to_string(count - 1) + ")");
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    o.pool.workers = static_cast<int>(list.size());
    o.pool.command = {self,       "gpu-worker", "--connect", "{address}",
                      "--worker", "{worker}",   "--devices", join(list, ",")};
    if (a.no_compile) o.pool.command.push_back("--no-compile");
    if (a.no_max_autotune) o.pool.command.push_back("--no-max-autotune");
  } else {
    o.pool.workers = a.workers;
    o.pool.command = {"/bin/sh", "-c", a.worker_command};
  }
  std::cout << "kforge evolve: starting " << o.pool.workers << " GPU worker(s)" << std::endl;
  auto gpu = std::make_unique<evolve::RemoteGpu>(o);
  // With a GPU, this process checks candidates and draws their tune spaces for its GPU 0: the
  // workers' GPUs must be of that kind. Without one, for the first worker's.
  verify::DeviceInfo there = gpu->device();
  if (here) {
    verify::DeviceInfo mine = verify::list_devices().at(0);
    if (evolve::gpu_kind(mine) != evolve::gpu_kind(there))
      throw UsageError("the GPU workers judge on " + there.name +
                       ", but this machine's GPU 0, for which kforge evolve "
                       "checks and tunes candidates, is " +
                       mine.name +
                       ": run kforge evolve where GPU 0 is of the "
                       "workers' kind, or on a machine without a GPU");
  }
  std::cout << "kforge evolve: " << gpu->parallel() << " GPU worker(s) ready, "
            << gpu->device().name << std::endl;
  return gpu;
}

// `kforge evolve --dry-run`: what the run would do, from its checked config, without a GPU,
// a model or a worker: nothing is judged, asked or recorded.
int print_dry_run(const EvolveArgs& a, const evolve::RunConfig& c,
                  const std::vector<std::shared_ptr<const tasks::Task>>& tasks, bool here) {
  auto budget = [](const std::string& what, double v, const std::string& unit) {
    return v > 0 ? what + " " + fixed(v, v == static_cast<int64_t>(v) ? 0 : 2) + unit : "";
  };
  std::vector<std::string> budgets;
  for (std::string b :
       {budget("evaluations", static_cast<double>(c.evaluations), ""),
        budget("minutes", c.minutes, ""), budget("GPU minutes", c.gpu_minutes, ""),
        budget("per task: evaluations", static_cast<double>(c.task_evaluations), ""),
        budget("per task: GPU minutes", c.task_gpu_minutes, ""),
        budget("LLM calls", static_cast<double>(c.llm_calls), ""),
        budget("LLM tokens", static_cast<double>(c.llm_tokens), ""),
        budget("LLM dollars", c.llm_dollars, ""),
        budget("target speedup", c.target_speedup, "x eager")})
    if (!b.empty()) budgets.push_back(b);
  std::string names;
  for (size_t i = 0; i < tasks.size() && i < 12; ++i) names += (i ? ", " : "") + tasks[i]->id();
  if (tasks.size() > 12) names += ", and " + std::to_string(tasks.size() - 12) + " more";
  std::string proposer =
      !c.llm_config.empty() ? "the LLM config " + c.llm_config + "'s ensemble"
      : c.model.rfind("batch:", 0) == 0
          ? "a batch folder, " + c.model.substr(6) + " (requests written there, answers read)"
      : !c.model.empty() ? "the model " + c.model
                         : "offline: the tuner over the tune spaces of the seeds and the archive";
  std::string operators =
      "the tuner: " + std::to_string(c.children) + " children per task and generation";
  if (!c.model.empty() || !c.llm_config.empty())
    operators += "; the model: " + std::to_string(c.llm_children) +
                 " (translate until a task has a correct kernel, then optimize " +
                 fixed(c.operators.optimize, 2) + ", crossover " + fixed(c.operators.crossover, 2) +
                 ", ideas " + fixed(c.operators.ideas, 2) + "), repairs " +
                 std::to_string(c.repair_attempts) + " deep";
  std::string judge =
      !a.worker_command.empty()
          ? std::to_string(a.workers) + " GPU worker(s) started by: " + a.worker_command
      : !a.gpus.empty() ? "GPU worker(s) on this machine's GPUs " + a.gpus
      : here            ? "this machine's GPU 0, " + verify::list_devices().at(0).name
                        : "no GPU here: the run would stop (exit 3); judge elsewhere with "
                          "--worker-command (docs/scale.md)";
  std::vector<std::pair<std::string, std::string>> t;
  t.push_back({"run", a.resume
                          ? "resume run " + std::to_string(*a.resume) + " (its recorded config)"
                          : "a new run, seed " + std::to_string(c.seed)});
  t.push_back({"tasks", std::to_string(tasks.size()) + ": " + names});
  t.push_back({"generations", std::to_string(c.generations) + " per task, " +
                                  std::to_string(c.islands) + " island(s), the best " +
                                  std::to_string(c.judge_top) +
                                  " screened children judged in full" +
                                  (c.admit ? ", new bests admitted" : ", no admission")});
  t.push_back({"budgets", budgets.empty() ? "none (the generations end it)" : join(budgets, ", ")});
  t.push_back({"proposer", proposer});
  t.push_back({"operators", operators});
  t.push_back({"judged on", judge});
  t.push_back({"archive", archive::database_path(a.db).string()});
  if (a.json) {
    nlohmann::json j = {{"dry_run", true}};
    for (const auto& [key, value] : t) j[key == "judged on" ? "judged_on" : key] = value;
    j["task_ids"] = nlohmann::json::array();
    for (const auto& task : tasks) j["task_ids"].push_back(task->id());
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "kforge evolve --dry-run: nothing is judged, asked or recorded\n";
  for (const auto& [key, value] : t)
    std::cout << "  " << key << std::string(13 - key.size(), ' ') << printable(value) << "\n";
  return kExitOk;
}

// --json: the run's outcome, per task and in all (what the closing table and lines say).
nlohmann::json summary_json(const evolve::RunSummary& s) {
  nlohmann::json tasks = nlohmann::json::array();
  for (const evolve::TaskStatus& t : s.tasks)
    tasks.push_back(
        {{"task", t.task},
         {"best", t.best ? nlohmann::json(*t.best) : nlohmann::json(nullptr)},
         {"best_ms", t.best_ms ? nlohmann::json(*t.best_ms) : nlohmann::json(nullptr)},
         {"speedup", t.baselines.speedups_json(t.best_ms)},
         {"baselines", t.baselines.to_json()},
         {"roofline_fraction",
          t.roofline_fraction ? nlohmann::json(*t.roofline_fraction) : nlohmann::json(nullptr)},
         {"screened", t.screened},
         {"judged", t.judged},
         {"correct", t.correct},
         {"failed", t.failed},
         {"stopped", t.stopped}});
  return {{"run", s.run},
          {"stopped", s.stopped},
          {"evaluations", s.evaluations},
          {"reused", s.reused},
          {"wall_s", s.wall_s},
          {"gpu_s", s.gpu_s},
          {"llm",
           {{"calls", s.llm.calls},
            {"cached", s.llm.cached},
            {"failed_calls", s.llm.failed_calls},
            {"tokens_in", s.llm.tokens_in},
            {"tokens_out", s.llm.tokens_out},
            {"cost_usd", s.llm.cost_usd}}},
          {"tasks", tasks}};
}

int run_evolve(const EvolveArgs& a) {
  if (a.llm != "auto" && a.llm != "none")
    throw UsageError("--llm: '" + a.llm + "' is not known: auto or none");
  if (a.llm == "none" && !a.model.empty())
    throw UsageError("--llm none and --model " + a.model + " contradict each other");
  if (!a.model.empty() && !a.llm_config.empty())
    throw UsageError("--model and --llm-config: give one (the config's ensemble or one model)");
  if (!a.gpus.empty() && !a.worker_command.empty())
    throw UsageError(
        "--gpus and --worker-command: give one (this machine's GPUs, or workers a launcher "
        "starts)");
  if (!a.worker_command.empty() && a.workers < 1)
    throw UsageError("--worker-command: say how many workers it starts with --workers N");
  // --batch-model: checked here against the flags; against a --config file's or a resumed run's
  // model once the run's config is read.
  if (!a.batch_model.empty()) {
    if (a.llm == "none" || !a.llm_config.empty() ||
        (!a.model.empty() && a.model.rfind("batch:", 0) != 0))
      throw UsageError(
          "--batch-model: only with --model batch:DIR (it names the model and format of the "
          "requests written there)");
    try {
      (void)evolve::endpoint_from_spec(a.batch_model);
    } catch (const InputError& e) {
      throw UsageError("--batch-model: " + e.problem());
    }
  }
  check_number_flags(a);
  // Everything that can be checked without a GPU is checked before one is asked for or a worker
  // started (exit 2, naming the file, key or task): the run's config (a resumed run's from the
  // archive), its tasks, its model or LLM config.
  evolve::EvaluatorOptions eo;
  eo.db = a.db;
  eo.compiler.workers = static_cast<size_t>(
      a.jobs.value_or(static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))));
  evolve::Evaluator evaluator(eo, nullptr);  // its GPU facts once the GPU is known (below)
  evolve::RunConfig config = evolve::run_config_for(
      request_of(a), [&]() -> archive::Archive& { return evaluator.archive(); });
  if (!a.batch_model.empty() && config.model.rfind("batch:", 0) != 0)
    throw UsageError("--batch-model: only with --model batch:DIR (the run's model: " +
                     (config.model.empty()
                          ? config.llm_config.empty() ? "none" : "the LLM config's ensemble"
                          : config.model) +
                     ")");
  evolve::check_llm_choice(config);
  // A batch folder's choices: recorded with the run; given again on --resume, they override.
  if (!a.batch_model.empty()) config.batch_model = a.batch_model;
  if (a.batch_wait_s) config.batch_wait_s = a.batch_wait_s;
  std::vector<std::shared_ptr<const tasks::Task>> tasks =
      evolve::run_tasks(config, a.tasks_dir.empty() ? tasks::default_tasks_root()
                                                    : std::filesystem::path(a.tasks_dir));
  // A GPU here, unless the workers run elsewhere: this process then checks, tunes and prompts for
  // their GPU, from what the first one says of it.
  bool here = verify::Driver::get().available();
  if (a.dry_run) return print_dry_run(a, config, tasks, here);
  StdoutToStderr redirect(a.json);
  if (a.worker_command.empty() && !here)
    throw verify::CudaError(
        "kforge evolve needs an NVIDIA GPU to judge on, and none can be used here: " +
        verify::Driver::get().unavailable_reason() +
        ". To judge on GPUs of other machines, start workers there with --worker-command "
        "(docs/scale.md); `kforge evolve --dry-run` shows what the run would do.");
  std::unique_ptr<evolve::RemoteGpu> workers;
  if (!a.gpus.empty() || !a.worker_command.empty()) workers = start_gpu_workers(a, here);
  evaluator.set_facts(here ? facts_for("") : workers->facts());
  if (config.model.empty() && config.llm_config.empty() && a.llm == "auto")
    std::cout << "kforge evolve: no LLM configured: the offline proposer (the autotuner over the "
                 "tune spaces of the "
                 "seeds and the archive's kernels) makes every child. To add a model: --model "
                 "openai:MODEL with "
                 "OPENAI_API_KEY (and OPENAI_BASE_URL for a local server), or --model "
                 "anthropic:MODEL with "
                 "ANTHROPIC_API_KEY (docs/evolve.md). --llm none says offline on purpose.\n";
  verify::VerifyOptions vo;
  apply_no_compile(a.no_compile, vo);
  apply_no_max_autotune(a.no_max_autotune, vo);
  vo.compiled.stop = [] { return g_stop.load() > 0; };  // Ctrl-C does not wait for the builds
  evolve::RemoteGpu* pool = workers.get();              // with --gpus or --worker-command
  std::unique_ptr<evolve::Gpu> gpu = workers ? std::move(workers) : evolve::make_judge_gpu(vo);
  evaluator.attach_gpu(gpu.get());

  std::unique_ptr<std::ofstream> log;
  if (!a.log_json.empty()) {
    log = std::make_unique<std::ofstream>(a.log_json, std::ios::app);
    if (!*log) throw UsageError("--log-json: cannot write " + a.log_json);
  }
  // On a terminal: a live line (the task being measured and the run's budget), and a line that
  // stays for each task's generation that found a new best or ended it. Otherwise a line for every
  // task's generation.
  Progress progress;
  std::map<std::string, std::optional<int64_t>> shown_best;
  evolve::LoopHooks hooks;
  hooks.stop = &g_stop;
  hooks.on_progress = [&](const evolve::TaskStatus& s) {
    bool news = shown_best[s.task] != s.best || !s.stopped.empty();
    shown_best[s.task] = s.best;
    if (progress.on() && !news) return;
    progress.clear();
    std::cout << "  " << printable(status_line(s))
              << (s.stopped.empty() ? "" : " [" + s.stopped + "]") << std::endl;
  };
  hooks.on_event = [&](const evolve::LoopEvent& e, const evolve::TaskStatus& s) {
    if (progress.on()) progress.show(live_line(s, e, config));
    if (log) *log << e.to_json().dump() << "\n" << std::flush;
  };
  // Ctrl-C, and SIGTERM (a batch system's or `kill`'s), end the run as it stands: recorded as
  // interrupted, so `--resume` goes on (a second signal ends it at once).
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  std::cout << "kforge evolve: " << tasks.size() << " task(s), " << config.generations
            << " generation(s), " << config.islands << " island(s), seed " << config.seed
            << (a.resume ? ", resuming run " + std::to_string(*a.resume) : "") << std::endl;
  std::shared_ptr<const evolve::BatchExchange> batch;
  std::unique_ptr<evolve::LlmProposer> llm =
      evolve::make_llm_proposer(config, {config.batch_model, config.batch_wait_s},
                                here ? device_line() : device_line(gpu->device()), batch);
  if (batch) {
    BatchFormat format = batch_format(config.batch_model);
    std::cout << "kforge evolve: the model's requests go to " << batch->requests_file().string()
              << " (" << format.requests
              << "); answers are read from the other .jsonl files there (" << format.answers
              << ") as they appear. Ctrl-C and `kforge evolve --resume` keep what was answered.\n";
    // While the model's answers are awaited, a line a minute says so (on stderr: from the
    // proposers' threads, beside the progress line).
    batch->on_waiting([](const evolve::BatchWaiting& w) {
      static std::mutex said;
      std::lock_guard<std::mutex> lock(said);
      std::cerr << "\nkforge evolve: waiting for " << w.unanswered << " answer(s) in "
                << w.dir.string() << ": " << fixed(w.waited_s / 60, 0) << " min so far; the run "
                << "pauses after " << fixed(w.limit_s / 3600, w.limit_s < 3600 ? 2 : 0)
                << " h without one (Ctrl-C pauses it now; scripts/batch-exchange.py pending "
                << w.dir.string() << " writes each prompt as a file)" << std::endl;
    });
  }
  if (llm)
    llm->set_target(evolve::recorded_target(
                        config, here ? prompt_gpu()
                                     : prompt_gpu(pool->device(), pool->facts(), pool->measured())),
                    evaluator.device_id());
  std::vector<const tasks::Task*> task_list;
  for (const auto& t : tasks) task_list.push_back(t.get());
  if (here)
    prepare_compiled_baselines(vo, task_list, std::cout);  // elsewhere each worker builds its own
  evolve::RunSummary s =
      evolve::run_evolution(config, tasks, evaluator, a.resume, hooks, llm.get());
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  progress.clear();
  std::vector<std::string> head = {"TASK", "BEST ms"};
  for (const std::string& label : baseline_labels(true)) head.push_back("x " + heading(label));
  for (const char* h : {"ROOFLINE", "SCREENED", "JUDGED", "CORRECT", "FAILED", "STOPPED"})
    head.push_back(h);
  Table table(head);
  for (const auto& t : s.tasks) {
    std::vector<std::string> row = {t.task, t.best_ms ? fixed(*t.best_ms, 4) : "-"};
    for (std::string& x : speedup_cells(t.baselines, t.best_ms)) row.push_back(x);
    for (std::string cell : {t.roofline_fraction ? fixed(100 * *t.roofline_fraction, 0) + "%" : "-",
                             std::to_string(t.screened), std::to_string(t.judged),
                             std::to_string(t.correct), std::to_string(t.failed), t.stopped})
      row.push_back(cell);
    table.add(row);
  }
  std::cout << "\n";
  table.print();
  if (pool) {
    std::cout << "\nGPU workers:";
    for (const evolve::WorkerState& w : pool->workers())
      std::cout << "\n  worker " << w.index << ": " << w.jobs_done << " job(s)"
                << (w.alive ? "" : ", taken out: " + w.out_reason);
    std::cout << "\n";
  }
  std::cout << "\nrun " << s.run << ": " << s.stopped << "; " << s.evaluations
            << " evaluation(s) measured, " << s.reused << " read back from the archive; "
            << fixed(s.wall_s, 1) << " s wall, GPU busy "
            << (s.wall_s > 0 ? fixed(100 * s.gpu_s / (s.wall_s * gpu->parallel()), 0) : "0") << "%"
            << (gpu->parallel() > 1
                    ? " (each of " + std::to_string(gpu->parallel()) + " GPU workers, on average)"
                    : "")
            << "\n"
            << (llm ? "LLM " + llm->models() + ": " + std::to_string(s.llm.calls) + " answer(s) (" +
                          std::to_string(s.llm.cached) + " from the response cache), " +
                          std::to_string(s.llm.failed_calls) + " failed call(s), " +
                          std::to_string(s.llm.tokens_in) + " tokens in" +
                          cached_share(s.llm.tokens_in, s.llm.tokens_cache_read) + ", " +
                          std::to_string(s.llm.tokens_out) + " out" +
                          (s.llm.cost_usd > 0 ? ", $" + fixed(s.llm.cost_usd, 4) + " at list price"
                                              : "") +
                          "\n"
                    : "")
            << "`kforge report " << s.run << "` writes its report; `kforge evolve --resume "
            << s.run << "` continues it"
            << (s.stopped == "time budget reached"
                    ? " (with --budget-minutes N: N minutes in all, what it spent counting)"
                : s.stopped == "evaluation budget reached"
                    ? " (with --budget-evaluations N: N evaluations in all)"
                    : "")
            << ".\n";
  if (s.stopped == evolve::kWaitingForAnswers && batch) {
    std::cout << "run " << s.run << " waits for " << batch->unanswered()
              << " answer(s) to the requests in " << batch->requests_file().string()
              << ". Put the answers (" << batch_format(config.batch_model).answers
              << ") in a .jsonl file beside it, then "
                 "`kforge evolve --resume "
              << s.run << "` (scripts/batch-exchange.py pending "
              << batch->requests_file().parent_path().string()
              << " writes each unanswered prompt as a file; collect turns answer files into "
                 "such lines).\n";
    if (a.json) redirect.print(summary_json(s));
    return kExitWaiting;
  }
  if (a.json) redirect.print(summary_json(s));
  return s.stopped == "interrupted" ? 130 : kExitOk;
}

}  // namespace

void add_evolve_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<EvolveArgs>();
  auto* cmd = app.add_subcommand("evolve", command_description("evolve"));
  cmd->add_option("tasks", a->tasks, "Suites, task files or names (default: the config's `tasks`)");
  cmd->add_option("--config", a->config_file,
                  "Run config (TOML, docs/evolve.md); flags override it");
  cmd->add_option("--resume", a->resume,
                  "Continue run RUN (its recorded config, but --budget-minutes and "
                  "--budget-evaluations as its new totals; nothing measured twice)");
  cmd->add_option("--llm", a->llm,
                  "none: the offline proposer only; auto (default): the LLM of --model when given");
  cmd->add_option("--model", a->model,
                  "The LLM proposer's model, e.g. openai:gpt-4.1 or anthropic:claude-sonnet-4-5 "
                  "(endpoint and key from "
                  "OPENAI_BASE_URL/OPENAI_API_KEY or ANTHROPIC_BASE_URL/ANTHROPIC_API_KEY; "
                  "docs/llm-config.md), or "
                  "batch:DIR (requests and answers as OpenAI Batch API files in DIR)");
  cmd->add_option("--llm-config", a->llm_config,
                  "An LLM config file (docs/llm-config.md): an ensemble of models with weights, "
                  "temperatures per role "
                  "and prices; instead of --model");
  cmd->add_option("--batch-model", a->batch_model,
                  "With --model batch:DIR: the requests' model and format, PROVIDER:MODEL "
                  "(anthropic:MODEL writes Anthropic Message Batches lines, openai:MODEL OpenAI "
                  "Batch API lines); recorded with the run (given with --resume, it overrides). "
                  "Default: OpenAI lines for model "
                  "\"batch\"");
  cmd->add_option("--batch-wait", a->batch_wait_s,
                  "With --model batch:DIR: seconds a request waits for its answer before the run "
                  "pauses (exit 75; "
                  "--resume goes on); default 24 h; recorded with the run like --batch-model");
  cmd->add_option("--seed", a->seed, "The run's random seed");
  cmd->add_option("--generations", a->generations, "Generations per task");
  cmd->add_option("--lookahead", a->lookahead,
                  "Rounds a task proposes ahead of its oldest uncommitted one (0: chosen from the "
                  "model's concurrency; 1: one generation at a time)");
  cmd->add_option("--budget-evaluations", a->budget_evaluations,
                  "Stop after this many screens and judgments");
  cmd->add_option("--budget-minutes", a->budget_minutes,
                  "Stop after this many minutes of wall time");
  cmd->add_option("--target-speedup", a->target_speedup,
                  "A task stops once its best is this many times eager");
  cmd->add_flag("--json", a->json,
                "The run's outcome (or --dry-run's plan) as JSON on stdout; progress and tables on "
                "stderr");
  cmd->add_flag("--dry-run", a->dry_run,
                "Check the run's config, tasks and model and print what it would do, without a "
                "GPU; nothing is judged, asked or recorded");
  cmd->add_flag("--no-admit", a->no_admit,
                "No admission for new bests (they are not winners then)");
  cmd->add_option("--jobs", a->jobs, "Compile workers (default: one per CPU)");
  cmd->add_option("--gpus", a->gpus,
                  "Judge on these GPUs of this machine, a worker each: all, or a list (0,1,2)");
  cmd->add_option("--workers", a->workers, "How many GPU workers --worker-command starts");
  cmd->add_option("--worker-command", a->worker_command,
                  "Starts one GPU worker (through sh), e.g. 'srun -n1 --gpus=1 kforge gpu-worker "
                  "--connect {address} "
                  "--worker {worker}' (docs/scale.md)");
  cmd->add_option("--worker-host", a->worker_host,
                  "The address GPU workers connect to (default 127.0.0.1; this machine's address "
                  "for other machines)");
  cmd->add_option(
         "--worker-deadline", a->worker_deadline_s,
         "Seconds a GPU worker may take over one job before it counts as hung (default 600)")
      ->check(CLI::PositiveNumber);
  add_no_compile_flag(cmd, a->no_compile);
  add_no_max_autotune_flag(cmd, a->no_max_autotune);
  cmd->add_option("--log-json", a->log_json,
                  "Append every screen and judgment as a JSON line to this file");
  cmd->add_option("--tasks-dir", a->tasks_dir, "Folder holding the suites");
  cmd->add_option("--db", a->db,
                  "Archive file (default $KFORGE_DB, else $XDG_DATA_HOME/kforge/archive.db)");
  cmd->callback([&exit_code, a] {
    try {
      exit_code = run_evolve(*a);
    } catch (const evolve::WorkerError&
                 e) {  // no GPU worker started, or none is left: a failure, not a kforge bug
      std::cerr << "kforge evolve: " << printable(redact_secrets(e.what())) << "\n";
      exit_code = kExitFindings;
    }
  });

  auto run = std::make_shared<int64_t>(0);
  auto db = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto* report = app.add_subcommand("report", command_description("report"));
  report->add_option("run", *run, "The run's id (kforge evolve prints it)")->required();
  report->add_option("--db", *db, "Archive file");
  report->add_option("-o,--output", *out, "Write the markdown here instead of standard output");
  auto json = std::make_shared<bool>(false);
  report->add_flag("--json", *json,
                   "The report's figures as JSON (per task best, baselines and speedups, the "
                   "field's metrics, outcomes, proposers, lineage) instead of markdown");
  report->callback(
      [&exit_code, run, db, out, json] { exit_code = run_report(*run, *db, *out, *json); });
}

}  // namespace kforge::cli
