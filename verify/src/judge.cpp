// The judge's orchestration (judge.h): Judge::verify and screen run the parts in judge_parts.h
// in order (set-up, correctness, timing) and guarded() turns harness failures into verdicts.
// Admission is in judge_admission.cpp.
#include "kforge/verify/judge.h"

#include <torch/cuda.h>

#include <algorithm>
#include <exception>
#include <set>
#include <variant>

#include "judge_parts.h"
#include "kforge/common/strings.h"
#include "kforge/verify/device_facts.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/memory.h"

namespace kforge::verify {

using nlohmann::json;

Verdict verdict_from_report(const compile::CandidateReport& report) {
  Verdict v;
  using compile::Stage;
  v.outcome = (report.stage == Stage::Plan || report.stage == Stage::Limits)
                  ? Outcome::PlanError
                  : Outcome::CompileError;
  v.summary = std::string(compile::stage_name(report.stage)) + ": " +
              (report.errors.empty() ? "?" : report.errors.front());
  v.evidence = {{"stage", compile::stage_name(report.stage)}, {"errors", report.errors}};
  return v;
}

namespace parts {

Verdict run_verification(Verification& j) {
  RunResult loaded = j.runner.set_module(j.image);
  if (loaded.status == RunStatus::LaunchError)
    return runner_failure(j, loaded, nullptr);  // the driver refused the module
  if (!loaded.ok())
    throw Error("the runner failed while loading the module, before any candidate code ran: " +
                loaded.evidence);
  Clock::time_point phase = Clock::now();
  double eager_ms = time_eager(j);
  note_phase(j.evidence, "eager_probe", phase);
  size_t launches = 1;  // the most any configuration makes (a launch's `when` can leave some out)
  for (const auto& [dims, plan] : j.report.configurations)
    launches = std::max(launches, plan.launches.size());
  j.watchdog = j.options.watchdog ? *j.options.watchdog : default_watchdog(eager_ms, launches);
  j.evidence["toolchain"] = toolchain(j.options.device);
  j.evidence["eager_ms"] = eager_ms;
  j.evidence["watchdog_ms"] = j.watchdog.count();
  std::variant<Correctness, Verdict> checked = check_correctness(j);
  if (Verdict* v = std::get_if<Verdict>(&checked)) return std::move(*v);
  Correctness& correct = std::get<Correctness>(checked);
  note_phase(j.evidence, "correctness", phase);
  j.evidence["configs"] = correct.configs;
  j.evidence["worst"] = correct.worst;
  std::set<std::string> flags;
  if (correct.bitwise_unstable) flags.insert(kFlagBitwiseUnstable);
  std::optional<TimingResult> timing;
  if (j.options.time && correct.timed) {
    std::variant<TimingResult, Verdict> t =
        time_candidate(j, *correct.timed, std::move(correct.timed_sets));
    if (std::holds_alternative<Verdict>(t)) return std::get<Verdict>(t);
    timing = std::get<TimingResult>(t);
    if (timing->suspicious) flags.insert(kFlagSuspicious);
    if (timing->clocks.value("slowed", false)) flags.insert(kFlagClockSlowdown);
    j.evidence["timing"] = timing->to_json();
  }
  Verdict v;
  v.timing = timing;
  v.outcome = flags.count(kFlagBitwiseUnstable) && j.task.deterministic ? Outcome::Nondeterministic
                                                                        : Outcome::Correct;
  v.flags.assign(flags.begin(), flags.end());
  v.evidence = j.evidence;
  const json& configs = correct.configs;
  json& worst = correct.worst;
  size_t runs = 0;
  for (const auto& c : configs) runs += c["seeds"].size() * 2;
  v.summary = "correct on " + std::to_string(configs.size()) + " configuration(s), " +
              std::to_string(runs) + " runs; worst normalized error " +
              (worst.is_null() ? std::string("0") : worst["normalized_error"].dump()) +
              (v.flags.empty() ? "" : " (flags: " + join(v.flags, ", ") + ")");
  return v;
}

}  // namespace parts

Judge::~Judge() = default;

Judge::Judge(VerifyOptions options)
    : options_(std::move(options)),
      runner_([&] {
        RunnerOptions r = options_.runner;
        r.device = options_.device;
        return r;
      }()),
      session_(std::make_unique<Session>()) {
  // A bad $KFORGE_GPU_MEMORY_LIMIT says so now, not at the first candidate.
  options_.memory_limit = memory_limit(options_.memory_limit);
  const Driver& d = Driver::get();
  d.require("verifying a candidate");
  CUdevice dev;
  KFORGE_CU_CHECK(d, d.cuDeviceGet(&dev, options_.device));
  CUcontext ctx;
  KFORGE_CU_CHECK(
      d, d.cuDevicePrimaryCtxRetain(&ctx, dev));  // LibTorch's context too; kept for the process
  KFORGE_CU_CHECK(d, d.cuCtxSetCurrent(ctx));
  if (!torch::cuda::is_available())
    throw CudaError("verifying a candidate needs a LibTorch built with CUDA; this one has none");
}

Verdict Judge::verify(const tasks::Task& task, const compile::CandidateReport& report) {
  return verify_with(options_, task, report);
}

Verdict Judge::verify_with(const VerifyOptions& options, const tasks::Task& task,
                           const compile::CandidateReport& report) {
  if (!report.ok()) return verdict_from_report(report);
  return guarded([&] {
    parts::Verification verification(options, runner_, *session_, task, report);
    try {
      return parts::run_verification(verification);
    } catch (const MemoryShortfall& e) {
      // Planned before anything was allocated for the timed dims: the runner is as it was.
      return parts::does_not_fit(verification.evidence, e.plan());
    } catch (const std::exception& e) {
      if (!is_out_of_memory(e)) throw;
      runner_.restart();
      return parts::out_of_memory(verification.evidence, e.what(), options.device);
    }
  });
}

TimingOptions Judge::screen_timing() {
  TimingOptions t;
  t.min_total_ms = 30;
  t.min_reps = 10;
  t.max_reps = 60;
  t.pool = 2;
  return t;
}

Verdict Judge::screen(const tasks::Task& task, const compile::CandidateReport& report) {
  VerifyOptions o = options_;
  o.timed_seeds = 1;
  o.check_seeds = 0;
  o.baselines = false;
  o.timing = screen_timing();
  return verify_with(o, task, report);
}

Verdict Judge::guarded(const std::function<Verdict()>& judge) {
  // Whatever the verdict, the runner lets go of this judgement's buffers before the next one
  // plans its memory. When an error leaves (the GPU is unusable), it is stopped instead of asked.
  struct DropBuffers {
    RunnerClient& runner;
    ~DropBuffers() {
      if (std::uncaught_exceptions() > 0) {
        runner.restart();
        return;
      }
      try {
        runner.drop_buffers();
      } catch (const std::exception&) {
        runner.restart();
      }
    }
  } drop{runner_};
  try {
    return judge();
  } catch (const MemoryShortfall& e) {
    return parts::does_not_fit({{"harness_version", kHarnessVersion}}, e.plan());
  } catch (const CudaError& e) {
    // Out of memory: does_not_fit for this candidate (verify_with keeps its evidence; here
    // admission and profiles). Anything else means the GPU itself is unusable: nothing more can be
    // judged.
    if (e.code() != CUDA_ERROR_OUT_OF_MEMORY) throw;
    runner_.restart();
    return parts::out_of_memory({{"harness_version", kHarnessVersion}}, e.what(), options_.device);
  } catch (const compile::PlanError& e) {
    // A rule only the judge can check: a tensor map past its tensor, whose size needs the
    // reference's output shapes.
    Verdict v;
    v.outcome = Outcome::PlanError;
    v.summary = std::string("plan: ") + e.what();
    v.evidence = {{"stage", "plan"}, {"errors", {e.what()}}, {"harness_version", kHarnessVersion}};
    return v;
  } catch (const std::exception& e) {
    if (is_out_of_memory(e)) {  // LibTorch's, raised in a reference or a comparison
      runner_.restart();
      return parts::out_of_memory({{"harness_version", kHarnessVersion}}, e.what(),
                                  options_.device);
    }
    // A kforge bug (LibTorch, the channel, the runner): this candidate gets no verdict on its
    // merits, and the run goes on with a fresh runner.
    std::string what = e.what();
    Verdict v;
    v.outcome = Outcome::HarnessError;
    v.summary = "harness error: " + what.substr(0, what.find('\n'));
    v.evidence = {{"error", what.substr(0, 4000)}, {"harness_version", kHarnessVersion}};
    runner_.restart();
    return v;
  }
}

}  // namespace kforge::verify
