// One candidate end to end: checked and compiled on the CPU (thread-safe, several at once), then on
// the GPU screened or judged in full, admitted when asked, and recorded in the archive with its
// lineage. `kforge verify`, `kforge corpus` and `kforge evolve` all evaluate through an Evaluator;
// the command line only parses and prints (docs/decisions.md, "The evaluation pipeline").
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kforge/archive/archive.h"
#include "kforge/archive/lineage.h"
#include "kforge/compile/candidate.h"
#include "kforge/compile/compiler.h"
#include "kforge/tasks/task.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/judge.h"
#include "kforge/verify/outcome.h"

namespace kforge::evolve {

// How a candidate came to be: the archive's candidates columns.
struct Lineage {
  std::optional<int64_t> run;
  std::vector<int64_t> parents;  // archive candidate ids
  int generation = 0, island = 0;
  // How it was made (the prompt_kind column), and who proposed it: a model, "human",
  // "offline-tuner".
  archive::LineageKind prompt_kind = archive::LineageKind::Manual;
  std::string model = "human";
};

// A candidate as proposed.
struct Proposal {
  std::shared_ptr<const tasks::Task> task;
  std::string source, plan;
  std::optional<compile::Tunables>
      tunables;  // some or all (compile::choose_tunables fills the rest)
  Lineage lineage;
  std::string label = "candidate.cu";       // the file compile errors refer to
  int first_line = 1;                       // of the source within that file
  std::optional<std::string> answer_error;  // the answer had no usable code or plan
  bool unanswered = false;  // no answer yet (a batch folder): not recorded, the run pauses
};

// A proposal after the CPU stage (plan, NVRTC, signatures, limits).
struct Checked {
  Proposal proposal;
  compile::CandidateReport report;
};

struct Evaluation {
  verify::Verdict verdict;
  std::optional<verify::Verdict> admission;  // when admission ran
  double verify_ms = 0, admission_ms = 0;    // wall
  bool admitted() const { return admission && admission->correct(); }
};

// Tuning by screening: every point screened, the fastest correct one chosen.
struct Screened {
  size_t chosen = 0;                // index into the points: the fastest correct (else 0)
  std::optional<double> chosen_ms;  // its screen median; none when no point screened correct
  nlohmann::json records =
      nlohmann::json::array();  // per point: tunables, outcome, median_ms or summary
  std::vector<std::pair<size_t, verify::Verdict>> wrong;  // points that did not screen correct
};

// The identity record() stores a candidate under: its checks' identity, or for one that failed
// before it had one (an answer error, a plan error) the hash of its source, plan and tunables, so
// that a resumed run finds it again instead of recording it twice.
std::string recorded_identity(const Checked& c);

// The admission verdict as stored in the evaluation's evidence and printed by --json.
nlohmann::json admission_json(const verify::Verdict& admission);

// The reference times as the archive stores them: each kind's median, or why it has none.
archive::BaselineTimes baseline_times(const verify::Baselines& b);

// The GPU side of an evaluation, behind an interface so that the loop's tests fake only the GPU.
// A candidate is given with its code (`c.proposal`) and its checks against the task it is given
// with (`c.report`): a GPU on another machine compiles the code again (gpu_worker.h).
class Gpu {
 public:
  virtual ~Gpu() = default;
  virtual verify::Verdict verify(const tasks::Task& task, const Checked& c) = 0;
  virtual verify::Verdict screen(const tasks::Task& task, const Checked& c) = 0;
  // After verify() found it correct: `unseen` holds configurations no candidate saw, and c.report
  // is the candidate checked against them.
  virtual verify::Verdict admit(const tasks::Task& unseen, const Checked& c) = 0;
  // The task's references (eager, scripted and torch.compile's where it can be) timed at its timed
  // dims; none where it cannot be.
  virtual std::optional<verify::Baselines> baselines(const tasks::Task& task) = 0;
  // Nsight Compute's profile of a correct candidate at the timed dims (verify::Judge::profile), or
  // {"error": why}; profiler() is the tool's path, "" where this GPU cannot profile.
  virtual nlohmann::json profile(const tasks::Task& task, const Checked& c) {
    (void)task, (void)c;
    return {{"error", "this GPU does not profile"}};
  }
  virtual std::string profiler() const { return ""; }
  virtual verify::DeviceInfo device() const = 0;  // the GPU the verdicts are recorded against
  virtual std::string driver() const = 0;         // its driver version, for the archive
  // A pool of GPUs of one kind (remote_gpu.h): each verdict, baseline and profile names the GPU
  // that gave it by its uuid (Verdict::gpu_uuid), one of devices(); `parallel()` calls at once
  // keep them all busy. A single GPU leaves gpu_uuid empty: it is device().
  virtual std::vector<verify::DeviceInfo> devices() const { return {device()}; }
  virtual int parallel() const { return 1; }
};

// A verify::Judge on options.device (needs a GPU: throws CudaError saying why not).
std::unique_ptr<Gpu> make_judge_gpu(const verify::VerifyOptions& options);

struct EvaluatorOptions {
  compile::DeviceFacts facts;
  compile::CompilerOptions compiler;
  std::string db;  // archive file for record(); "" the default location
  int admission_configurations = 3;
};

class Evaluator {
 public:
  // `gpu` may be null for a CPU-only evaluator (check() and record() of what never reached a GPU).
  Evaluator(EvaluatorOptions options, Gpu* gpu);
  ~Evaluator();

  // The task's output tensors (its reference compiled once per task version, in
  // tasks::shared_references()), on the calling thread; check() on a pool thread then finds them
  // ready.
  void prepare(const tasks::Task& task) { (void)task_tensors(task); }
  std::vector<compile::TensorInfo> task_tensors(const tasks::Task& task);
  // Thread-safe.
  Checked check(Proposal p);
  // check() and tune_points() on the evaluator's compile threads (options.compiler.workers of
  // them), so that compiles run ahead of the GPU; the result in submission order is the caller's.
  std::future<std::vector<Checked>> check_async(Proposal p, int tune_points);
  // At most `count` points of an ok candidate's tune space, spread evenly, its own point first
  // (compile::sample_tune_space), each checked; [c] when it has one point or is not ok.
  std::vector<Checked> tune_points(const Checked& c, int count);

  verify::Verdict screen(const Checked& c);
  // Screens every point (at least two) and picks the fastest that screened correct.
  Screened screen_points(const std::vector<Checked>& points);
  // verify(); then admission when `admit` and the verdict is correct.
  Evaluation judge(const Checked& c, bool admit);
  // Admission alone, for a candidate judged correct before.
  verify::Verdict admit(const Checked& c, uint64_t seed);
  // Gpu::profile of the candidate.
  nlohmann::json profile(const Checked& c);

  // The candidate, its compile report and its evaluation (none: only the compile) in one archive
  // transaction, against the GPU it ran on. Returns the candidate's archive id.
  // `with_compile`: false when the candidate's compile report is recorded already.
  int64_t record(const Checked& c, const std::optional<Evaluation>& e, bool with_compile = true);
  // The archive record() writes to (opened, and created or migrated, on first use).
  archive::Archive& archive();
  // The archive's id of the GPU (recorded on first use); needs a GPU. With a uuid: the GPU of the
  // pool that has it (Gpu::devices), "" device().
  int64_t device_id(const std::string& uuid = "");

  // The GPU, when it is started after the compiles were queued (so that they overlap).
  void attach_gpu(Gpu* gpu) { gpu_ = gpu; }
  // The GPU's facts, once it is known (kforge evolve checks its config and tasks before that).
  void set_facts(compile::DeviceFacts facts) { options_.facts = std::move(facts); }
  compile::Compiler& compiler() { return *compiler_; }
  int compile_workers() const { return static_cast<int>(options_.compiler.workers); }
  const compile::DeviceFacts& facts() const { return options_.facts; }
  Gpu* gpu() { return gpu_; }

 private:
  EvaluatorOptions options_;
  Gpu* gpu_;
  std::unique_ptr<compile::Compiler> compiler_;
  std::mutex mutex_;
  std::unique_ptr<archive::Archive> archive_;
  std::map<std::string, int64_t> device_ids_;  // by uuid
  class Pool;
  std::unique_ptr<Pool> pool_;  // the compile threads, started on first use
};

}  // namespace kforge::evolve
