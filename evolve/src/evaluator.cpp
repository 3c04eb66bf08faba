#include "kforge/evolve/evaluator.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>

#include "kforge/archive/archive.h"
#include "kforge/archive/location.h"
#include "kforge/common/identity.h"
#include "kforge/common/json_limits.h"
#include "kforge/compile/nvrtc.h"
#include "kforge/compile/plan.h"
#include "kforge/tasks/reference.h"
#include "kforge/tasks/reference_cache.h"
#include "kforge/verify/protocol.h"

namespace kforge::evolve {
namespace {

using nlohmann::json;

class JudgeGpu : public Gpu {
 public:
  explicit JudgeGpu(const verify::VerifyOptions& options)
      : options_(options),
        judge_(options),
        device_(verify::list_devices().at(static_cast<size_t>(options.device))) {}
  verify::Verdict verify(const tasks::Task& task, const Checked& c) override {
    return judge_.verify(task, c.report);
  }
  verify::Verdict screen(const tasks::Task& task, const Checked& c) override {
    return judge_.screen(task, c.report);
  }
  verify::Verdict admit(const tasks::Task& unseen, const Checked& c) override {
    return judge_.admit(unseen, c.report);
  }
  std::optional<verify::Baselines> baselines(const tasks::Task& task) override {
    return verify::measure_baselines(task, options_);
  }
  nlohmann::json profile(const tasks::Task& task, const Checked& c) override {
    return judge_.profile(task, c.report, ncu_);
  }
  std::string profiler() const override { return ncu_; }
  verify::DeviceInfo device() const override { return device_; }
  std::string driver() const override { return std::to_string(verify::driver_version()); }

 private:
  verify::VerifyOptions options_;
  verify::Judge judge_;
  verify::DeviceInfo device_;
  std::string ncu_ = verify::find_cuda_tool("ncu");
};

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

archive::CompileRecord compile_record(const compile::CandidateReport& r, const std::string& arch) {
  archive::CompileRecord comp;
  comp.ok = r.module.ok;
  comp.stage = compile::stage_name(r.stage);
  comp.errors = r.errors;
  comp.log = r.module.log;
  for (const auto& k : r.kernels)
    comp.resources[k.name] = {{"registers", k.resources.registers},
                              {"static_shared_bytes", k.resources.static_shared_bytes},
                              {"spill_store_bytes", k.resources.spill_store_bytes}};
  comp.compile_ms = r.module.compile_ms;
  comp.arch = arch;
  return comp;
}

}  // namespace

std::unique_ptr<Gpu> make_judge_gpu(const verify::VerifyOptions& options) {
  return std::make_unique<JudgeGpu>(options);
}

// A fixed set of threads taking jobs in order; on destruction the running jobs finish and the
// queued ones are dropped.
class Evaluator::Pool {
 public:
  explicit Pool(size_t threads) {
    for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i)
      threads_.emplace_back([this] {
        for (;;) {
          std::function<void()> job;
          {
            std::unique_lock<std::mutex> lock(mutex_);
            cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
            if (stopping_) return;  // queued jobs are dropped: their futures say broken_promise
            job = std::move(jobs_.front());
            jobs_.pop_front();
          }
          job();
        }
      });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

Evaluator::Evaluator(EvaluatorOptions options, Gpu* gpu)
    : options_(std::move(options)),
      gpu_(gpu),
      compiler_(std::make_unique<compile::Compiler>(options_.compiler)) {}

Evaluator::~Evaluator() = default;  // the pool first (declared last): its jobs use the compiler

std::future<std::vector<Checked>> Evaluator::check_async(Proposal p, int points) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pool_) pool_ = std::make_unique<Pool>(options_.compiler.workers);
  }
  auto promise = std::make_shared<std::promise<std::vector<Checked>>>();
  std::future<std::vector<Checked>> result = promise->get_future();
  pool_->post([this, promise, p = std::move(p), points]() mutable {
    try {
      promise->set_value(tune_points(check(std::move(p)), points));
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  });
  return result;
}

std::vector<compile::TensorInfo> Evaluator::task_tensors(const tasks::Task& task) {
  return compile::task_tensors(task, tasks::shared_references().outputs(task));
}

Checked Evaluator::check(Proposal p) {
  Checked c;
  if (p.answer_error) {
    c.report.errors = {*p.answer_error};
  } else {
    c.report = compile::check_candidate(*p.task, task_tensors(*p.task), p.source, p.plan,
                                        p.tunables, options_.facts, *compiler_);
    for (auto& e : c.report.errors) e = compile::relabel_log(e, p.label, p.first_line);
  }
  c.proposal = std::move(p);
  return c;
}

std::vector<Checked> Evaluator::tune_points(const Checked& c, int count) {
  std::vector<Checked> out{c};
  if (count < 2 || !c.report.ok()) return out;
  const tasks::Task& task = *c.proposal.task;
  compile::Plan plan = compile::parse_plan_text(c.proposal.plan, task, task_tensors(task));
  for (const compile::Tunables& t :
       compile::sample_tune_space(compile::tune_space(plan, task.dims, options_.facts), count)) {
    if (t == c.report.tunables) continue;
    Proposal p = c.proposal;
    p.tunables = t;
    out.push_back(check(std::move(p)));
  }
  return out;
}

verify::Verdict Evaluator::screen(const Checked& c) {
  if (!gpu_) throw Error("Evaluator::screen without a GPU (a kforge bug)");
  return gpu_->screen(*c.proposal.task, c);
}

json Evaluator::profile(const Checked& c) {
  if (!gpu_) throw Error("Evaluator::profile without a GPU (a kforge bug)");
  return gpu_->profile(*c.proposal.task, c);
}

Screened Evaluator::screen_points(const std::vector<Checked>& points) {
  Screened out;
  for (size_t i = 0; i < points.size(); ++i) {
    verify::Verdict s = screen(points[i]);
    json point{{"tunables", points[i].report.tunables}, {"outcome", verify::to_string(s.outcome)}};
    if (s.correct() && s.timing) {
      double ms = s.timing->time.median_ms;
      point["median_ms"] = ms;
      if (!out.chosen_ms || ms < *out.chosen_ms) out.chosen = i, out.chosen_ms = ms;
    } else {
      point["summary"] = s.summary.substr(0, 300);
      out.wrong.emplace_back(i, std::move(s));
    }
    out.records.push_back(point);
  }
  return out;
}

Evaluation Evaluator::judge(const Checked& c, bool admit_it) {
  if (!gpu_) throw Error("Evaluator::judge without a GPU (a kforge bug)");
  Evaluation e;
  auto t0 = std::chrono::steady_clock::now();
  e.verdict = gpu_->verify(*c.proposal.task, c);
  e.verify_ms = ms_since(t0);
  if (admit_it && e.verdict.correct()) {
    auto t1 = std::chrono::steady_clock::now();
    e.admission = admit(c, e.verdict.evidence.value("seed", uint64_t{1}));
    e.admission_ms = ms_since(t1);
  }
  return e;
}

verify::Verdict Evaluator::admit(const Checked& c, uint64_t seed) {
  const tasks::Task& task = *c.proposal.task;
  // Unseen dims where the plan can run at the tunables it was judged with (its constraints, say
  // "N % VEC == 0", may rule some out: those are not the candidate's failure).
  compile::Plan plan = compile::parse_plan_text(c.proposal.plan, task, task_tensors(task));
  auto usable = [&](const tasks::Dims& d) {
    try {
      return compile::constraints_hold(plan, d, c.report.tunables, options_.facts);
    } catch (const compile::PlanError&) {
      return false;
    }
  };
  std::optional<tasks::Task> unseen =
      verify::unseen_task(task, seed, options_.admission_configurations, usable);
  if (!unseen) {
    verify::Verdict v;
    v.outcome = verify::Outcome::HarnessError;
    v.summary =
        "admission: no dims configuration that was not shown satisfies the task's constraints and "
        "the "
        "plan's at these tunables";
    return v;
  }
  Checked on_unseen{c.proposal, compile::check_candidate(
                                    *unseen, task_tensors(task), c.proposal.source, c.proposal.plan,
                                    c.report.tunables, options_.facts, *compiler_)};
  verify::Verdict v = gpu_->admit(*unseen, on_unseen);
  if (!on_unseen.report.ok()) v.summary = "admission on unseen dims: " + v.summary;
  return v;
}

archive::Archive& Evaluator::archive() {
  if (!archive_)
    archive_ = std::make_unique<archive::Archive>(
        archive::Archive::open(archive::database_path(options_.db).string(), /*create=*/true));
  return *archive_;
}

int64_t Evaluator::device_id(const std::string& uuid) {
  if (!gpu_) throw Error("Evaluator::device_id without a GPU (a kforge bug)");
  auto known = device_ids_.find(uuid);
  if (known != device_ids_.end()) return known->second;
  std::optional<verify::DeviceInfo> d;
  if (uuid.empty()) d = gpu_->device();
  for (const verify::DeviceInfo& x : gpu_->devices())
    if (!d && x.uuid == uuid) d = x;
  if (!d) throw Error("the GPU " + uuid + " is not one of the pool's (a kforge bug)");
  int64_t id =
      archive()
          .upsert_device(d->uuid, d->name, compile::arch_for(d->cc_major, d->cc_minor), d->sm_count,
                         static_cast<int64_t>(d->memory_bytes), gpu_->driver())
          .value;
  return device_ids_[uuid] = id;
}

namespace {

json stored_plan(const std::string& plan) {
  try {
    return parse_json_bounded(plan, "plan", compile::kMaxPlanDepth, compile::kMaxPlanBytes);
  } catch (const InputError&) {
    return {{"unparsed", plan}};
  }
}

}  // namespace

std::string recorded_identity(const Checked& c) {
  // A candidate that failed before it had an identity gets the same hash of what is stored, so an
  // import of an export can recompute it (archive import never believes a stated identity).
  if (!c.report.identity.empty()) return c.report.identity;
  return candidate_identity(c.proposal.source, stored_plan(c.proposal.plan), c.report.tunables);
}

int64_t Evaluator::record(const Checked& c, const std::optional<Evaluation>& ev,
                          bool with_compile) {
  const tasks::Task& task = *c.proposal.task;
  const Proposal& p = c.proposal;
  const compile::CandidateReport& r = c.report;
  archive::Archive& ar = archive();
  archive::NewCandidate nc;
  nc.task = ar.upsert_task(task);
  nc.source = p.source;
  nc.plan = stored_plan(p.plan);
  nc.tunables = r.tunables;
  nc.identity = recorded_identity(c);
  if (p.lineage.run) nc.run = archive::RunId{*p.lineage.run};
  for (int64_t parent : p.lineage.parents) nc.parents.push_back(archive::CandidateId{parent});
  nc.generation = p.lineage.generation;
  nc.island = p.lineage.island;
  nc.prompt_kind = std::string(archive::to_string(p.lineage.prompt_kind));
  nc.model = p.lineage.model;
  std::optional<verify::DeviceInfo> gpu;
  if (gpu_) gpu = gpu_->device();
  archive::CompileRecord comp = compile_record(
      r, gpu ? compile::arch_for(gpu->cc_major, gpu->cc_minor) : options_.facts.arch);
  std::vector<archive::EvaluationRecord> evaluations;
  if (ev) {
    const verify::Verdict& v = ev->verdict;
    archive::EvaluationRecord e;
    if (gpu) e.device = archive::DeviceId{device_id(v.gpu_uuid)};
    e.outcome = verify::to_string(v.outcome);
    e.flags = v.flags;
    e.evidence = v.evidence;
    e.evidence["summary"] = v.summary;  // what went wrong in words (the prompts quote failures)
    if (ev->admission) e.evidence["admission"] = admission_json(*ev->admission);
    e.admitted = ev->admitted();
    e.dims = task.dims;
    e.harness_version = verify::kHarnessVersion;
    e.toolchain = v.evidence.value("toolchain", json::object());
    if (v.timing) {
      const verify::TimingResult& t = *v.timing;
      e.time_ms = t.time.median_ms, e.time_iqr_ms = t.time.iqr_ms, e.time_min_ms = t.time.min_ms;
      e.baselines = verify::medians(t.baselines);
      e.roofline_fraction = t.roofline_fraction;
      if (e.device) ar.store_baseline(nc.task, task.dims, *e.device, t.math_mode, e.baselines);
    }
    evaluations.push_back(std::move(e));
  }
  return ar
      .add_candidate(nc, with_compile ? std::optional<archive::CompileRecord>(comp) : std::nullopt,
                     evaluations)
      .value;
}

archive::BaselineTimes baseline_times(const verify::Baselines& b) {
  return verify::medians(b.list);
}

json admission_json(const verify::Verdict& a) {
  return {{"admitted", a.correct()},
          {"outcome", verify::to_string(a.outcome)},
          {"summary", a.summary},
          {"evidence", a.evidence}};
}

}  // namespace kforge::evolve
