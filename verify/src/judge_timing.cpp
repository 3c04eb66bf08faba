// Timing and baselines (docs/design.md, Verification 3-5; judge_parts.h): the candidate over a
// pool of input sets, every kind of baseline (eager, scripted, torch.compile's packages) timed the
// same way, and the roofline floor.
#include <algorithm>

#include "judge_parts.h"
#include "kforge/tasks/math_mode.h"
#include "kforge/verify/device_facts.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/gpu_generator.h"

namespace kforge::verify {

using nlohmann::json;

namespace {

using parts::synchronize;

// The reference's outputs a compiled package is checked against: at the inputs' precision and in
// float64, run once for every compiled kind.
struct ReferenceOutputs {
  std::vector<torch::Tensor> eager, wide;
};

ReferenceOutputs reference_outputs(const tasks::Task& task, const tasks::Reference& ref,
                                   const std::vector<torch::Tensor>& inputs) {
  ReferenceOutputs out;
  out.eager = parts::run_reference(task, ref, inputs, false);
  std::vector<torch::Tensor> wide;
  for (const torch::Tensor& t : inputs)
    wide.push_back(t.is_floating_point() ? t.to(torch::kFloat64) : t);
  out.wide = parts::run_reference(task, ref, wide, false);
  return out;
}

// torch.compile's package of kind `kind` for the task at `inputs`' shapes (built or taken from
// the cache), loaded, and its outputs on `inputs` compared with the reference's (`expected`,
// worked out on the first package that loads) as a candidate's are: a compiled baseline that
// computes something else is no baseline.
parts::CompiledBaseline load_compiled(const tasks::Task& task, const tasks::Reference& ref,
                                      const std::vector<torch::Tensor>& inputs,
                                      const VerifyOptions& o, BaselineKind kind,
                                      std::optional<ReferenceOutputs>& expected) {
  parts::CompiledBaseline out;
  CompiledPackage package = compiled_package(task, inputs, o.device, kind, o.compiled);
  out.build_s = package.build_s;
  if (package.path.empty()) {
    out.absent = package.absent;
    return out;
  }
  try {
    out.reference = std::make_shared<CompiledReference>(package.path, o.device);
    std::vector<torch::Tensor> got;
    {
      tasks::MathModeGuard mode(task.allow_tf32);
      got = out.reference->run(inputs);
    }
    if (!expected) expected = reference_outputs(task, ref, inputs);
    const std::vector<torch::Tensor>& eager = expected->eager;
    const std::vector<torch::Tensor>& r64 = expected->wide;
    if (got.size() != eager.size())
      throw Error("it returns " + std::to_string(got.size()) + " output(s), the reference " +
                  std::to_string(eager.size()));
    for (size_t i = 0; i < got.size(); ++i) {
      tasks::Dtype dt =
          tasks::from_scalar_type(eager[i].scalar_type()).value_or(tasks::Dtype::Float32);
      Comparison c = compare_output(
          got[i], r64[i].to(eager[i].is_floating_point() ? torch::kFloat64 : r64[i].scalar_type()),
          eager[i], dt, parts::tolerance_for(task, i, dt));
      if (!c.ok)
        throw Error("its output " + std::to_string(i) + " differs from the reference" +
                    (c.problem.empty()
                         ? " (max error " + std::to_string(c.max_abs_error) + ", " +
                               std::to_string(c.mismatches) + " element(s) beyond the threshold)"
                         : ": " + c.problem));
    }
  } catch (const std::exception& e) {
    out.reference.reset();
    out.absent = "torch.compile's package (" + std::string(*compiled_mode(kind)) + " mode, " +
                 package.path + ") is not usable: " + e.what();
  }
  return out;
}

// Every compiled kind's package (load_compiled), loaded before any baseline is timed; the
// reference runs once for all of them.
parts::CompiledBaselines load_compiled(const tasks::Task& task, const tasks::Reference& ref,
                                       const std::vector<torch::Tensor>& inputs,
                                       const VerifyOptions& o) {
  parts::CompiledBaselines out;
  std::optional<ReferenceOutputs> expected;
  for (BaselineKind kind : compiled_kinds())
    out.emplace(kind, load_compiled(task, ref, inputs, o, kind, expected));
  return out;
}

// The package that a compiled kind runs; nullptr for a kind without a torch.compile mode (eager
// and scripted: the reference itself).
const parts::CompiledBaseline* package_of(BaselineKind kind,
                                          const parts::CompiledBaselines& compiled) {
  if (!compiled_mode(kind)) return nullptr;
  auto it = compiled.find(kind);
  if (it == compiled.end())
    throw Error("the judge has no way to time the " + std::string(to_string(kind)) + " baseline");
  return &it->second;
}

// Every kind of baseline (baseline_kinds()) timed like candidates: the pool's sets copied into the
// same tensors, then hold, flush, events around the call, release. A compiled kind without a
// package is absent with its reason.
Baselines time_references(const tasks::Task& task, const tasks::Reference& ref,
                          const std::vector<std::vector<torch::Tensor>>& pool, TimingGate& gate,
                          const TimingOptions& o, ClockMonitor& clocks,
                          const parts::CompiledBaselines& compiled) {
  std::vector<torch::Tensor> fixed;
  for (const torch::Tensor& in : pool.at(0)) fixed.push_back(in.clone());
  Baselines b;
  b.math_mode = task.allow_tf32 ? "tf32" : "ieee";
  for (const BaselineKindInfo& info : baseline_kinds()) {
    const BaselineKind kind = info.kind;
    const parts::CompiledBaseline* package = package_of(kind, compiled);
    BaselineTiming timing;
    timing.kind = kind;
    if (package) {
      timing.build_s = package->build_s;
      if (!package->reference) {
        timing.absent = package->absent;
        b.list.push_back(std::move(timing));
        continue;
      }
    }
    EventTimer timer(&gate);
    TimingOptions bo = o;
    if (kind == BaselineKind::Scripted)
      bo.warmups = std::max(bo.warmups, 5);  // the profiling executor optimises after 2 runs
    TimeStats s = time_repeatedly(
        [&](int rep) {
          const auto& set = pool[static_cast<size_t>(rep) % pool.size()];
          for (size_t i = 0; i < fixed.size(); ++i) fixed[i].copy_(set[i]);
          synchronize();
        },
        [&](int) {
          timer.start();
          if (package) {
            tasks::MathModeGuard mode(task.allow_tf32);
            package->reference->run(fixed);
          } else {
            parts::run_reference(task, ref, fixed, kind == BaselineKind::Scripted);
          }
          double ms = timer.stop_ms();
          clocks.sample();
          return ms;
        },
        [](int) {}, bo);
    s.held = timer.held();
    timing.stats = s;
    b.list.push_back(std::move(timing));
  }
  return b;
}

}  // namespace

Baselines measure_baselines(const tasks::Task& task, const VerifyOptions& options) {
  Driver::get().require("timing baselines");
  // A reference of its own, not a cache's: the executor it times as eager and scripted starts
  // fresh, so that the baselines depend on nothing else that ran (tasks/reference_cache.h).
  tasks::Reference ref = tasks::Reference::compile(task);
  std::vector<std::vector<torch::Tensor>> pool;
  uint64_t seed = options.seed.value_or(1);
  for (int k = 0; k < options.timing.pool; ++k) {
    std::vector<torch::Tensor> set;
    for (size_t i = 0; i < task.inputs.size(); ++i)
      set.push_back(generate_cuda(task, i, task.dims, seed + 50 + static_cast<uint64_t>(k), 0,
                                  options.device));
    pool.push_back(std::move(set));
  }
  TimingGate gate(options.device);
  ClockMonitor clocks = clock_monitor(options.device);
  parts::CompiledBaselines compiled = load_compiled(task, ref, pool.at(0), options);
  Baselines b = time_references(task, ref, pool, gate, options.timing, clocks, compiled);
  b.clocks = clocks.summary();
  return b;
}

namespace parts {
namespace {

struct TimedFailure {
  RunResult result;
};
struct TimedWrong {
  std::string summary;
  json detail;
};

// Every kind of baseline on the timed dims: timed now, or reused from this judge's last timing of
// the same task version, dims and math mode within options.baseline_reuse. A package's build time
// is told once, with the first timing that waited for it.
Baselines baselines(Verification& j, const Config& c, const std::vector<PoolSet>& pool,
                    ClockMonitor& clocks) {
  const tasks::Task& task = j.task;
  std::string key =
      task.content_hash + " " + tasks::format_dims(c.dims) + (task.allow_tf32 ? " tf32" : " ieee");
  auto it = j.session.baselines.find(key);
  if (it != j.session.baselines.end() && Clock::now() - it->second.at < j.options.baseline_reuse) {
    j.evidence["baselines_reused_from_s_ago"] =
        std::chrono::duration<double>(Clock::now() - it->second.at).count();
    return it->second.baselines;
  }
  std::vector<std::vector<torch::Tensor>> inputs;
  for (const PoolSet& p : pool) inputs.push_back(p.inputs);
  std::string shapes;
  for (const torch::Tensor& t : inputs.at(0)) shapes += " " + c10::str(t.sizes());
  auto compiled = j.session.compiled.find(task.content_hash + shapes);
  if (compiled == j.session.compiled.end())
    compiled = j.session.compiled
                   .emplace(task.content_hash + shapes,
                            load_compiled(task, j.reference, inputs.at(0), j.options))
                   .first;
  Baselines b = time_references(task, j.reference, inputs, j.session.gate(j.options.device),
                                j.options.timing, clocks, compiled->second);
  for (auto& [kind, package] : compiled->second) package.build_s = 0;
  Baselines kept = b;
  for (BaselineTiming& timing : kept.list) timing.build_s = 0;
  j.session.baselines[key] = {kept, Clock::now()};
  return b;
}

// A timed repetition's outputs against eager's on the same set; throws TimedWrong.
void check_timed_outputs(Config& c, const PoolSet& set, int rep) {
  for (size_t o = 0; o < c.outputs; ++o) {
    const torch::Tensor& out = c.buffers[c.inputs + o]->tensor();
    double worst = 0;
    bool ok = set.allowed[o] == 0
                  ? torch::equal(out, set.eager[o])
                  : (worst = max_abs_difference(out, set.eager[o])) <= set.allowed[o];
    if (!ok)
      throw TimedWrong{"output '" + c.names[c.inputs + o] + "' differs from eager's by " +
                           std::to_string(worst) + " (allowed " + std::to_string(set.allowed[o]) +
                           ") at timed repetition " + std::to_string(rep),
                       {{"output", c.names[c.inputs + o]},
                        {"repetition", rep},
                        {"max_abs_difference", worst},
                        {"allowed", set.allowed[o]}}};
  }
}

}  // namespace

std::variant<TimingResult, Verdict> time_candidate(Verification& j, Config& c,
                                                   std::vector<PoolSet> pool) {
  const VerifyOptions& options = j.options;
  const tasks::Task& task = j.task;
  const TimingOptions& o = options.timing;
  Clock::time_point phase = Clock::now();
  RunResult shared = j.runner.set_buffers(specs(c, true), fds(c));
  if (!shared.ok()) throw Error("the runner failed to map the buffers: " + shared.evidence);
  // The memory plan's count (PoolPlan::sets), options.timing.pool without one.
  const int sets = j.pool_sets > 0 ? j.pool_sets : o.pool;
  for (int k = 0; static_cast<int>(pool.size()) < sets; ++k) {
    PoolSet p;
    p.inputs = draw_inputs(j, c.dims, j.seed + 50 + static_cast<uint64_t>(k), 0);
    std::vector<torch::Tensor> e = eager(j, p.inputs), r64 = reference64(j, p.inputs);
    for (size_t i = 0; i < e.size(); ++i) {
      tasks::Dtype dt = tasks::from_scalar_type(e[i].scalar_type()).value_or(tasks::Dtype::Float32);
      double allowed = 0;
      if (tasks::is_floating(dt)) {
        Comparison self =
            compare_output(e[i], r64[i].to(torch::kFloat64), e[i], dt, tolerance_for(task, i, dt));
        allowed = self.threshold + self.max_abs_error;
      }
      p.eager.push_back(e[i]);
      p.allowed.push_back(allowed);
    }
    pool.push_back(std::move(p));
  }
  j.evidence["timing_pool_sets"] = pool.size();
  note_phase(j.evidence, "timing_pool", phase);
  RunRequest request = c.request;
  request.timed = true;
  auto set_of = [&](int rep) -> PoolSet& { return pool[static_cast<size_t>(rep) % pool.size()]; };

  TimingResult t;
  bool held = true;
  ClockMonitor clocks = clock_monitor(options.device);
  try {
    TimeStats candidate = time_repeatedly(
        [&](int rep) {
          for (size_t i = 0; i < c.inputs; ++i) c.buffers[i]->tensor().copy_(set_of(rep).inputs[i]);
          for (size_t i = c.inputs; i < c.buffers.size(); ++i)
            poison(c.buffers[i]->tensor(), Poison::NaN, 0);
          synchronize();  // the runner holds its stream, flushes the L2 and times (timing_gate.h)
        },
        [&](int) {
          RunResult r = j.runner.run(request, j.watchdog);
          if (!r.ok()) throw TimedFailure{r};
          if (r.reply.hold_timed_out) held = false;
          clocks.sample();  // right after the GPU finished: the clock it ran at
          return r.reply.gpu_ms;
        },
        [&](int rep) { check_timed_outputs(c, set_of(rep), rep); }, o);
    t.time = candidate;
    t.time.held = held;
    note_phase(j.evidence, "timing_candidate", phase);
  } catch (const TimedFailure& f) {
    Place at{&c, j.seed + 50, 0, 3};
    return runner_failure(j, f.result, &c, set_of(0).inputs, at);
  } catch (const TimedWrong& w) {
    Place at{&c, j.seed + 50, 0, 3};
    return fail(j.evidence, Outcome::WrongResult, w.summary + " (while timing)", w.detail, at);
  }

  if (options.baselines) {
    Baselines b = baselines(j, c, pool, clocks);
    note_phase(j.evidence, "baselines", phase);
    t.baselines = b.list;
  }

  MeasuredFacts facts = device_facts(options.device);
  // Inputs and outputs once (their real sizes: meta shapes are unknown for some ops), or the
  // task's min_bytes.
  double moved = static_cast<double>(task.input_bytes(c.dims));
  for (size_t o = 0; o < c.outputs; ++o)
    moved += static_cast<double>(c.buffers[c.inputs + o]->tensor().nbytes());
  std::optional<double> bytes = task.min_bytes ? task.min_bytes->eval_real(c.dims) : moved;
  std::optional<double> flops;
  if (task.flops) flops = task.flops->eval_real(c.dims);
  tasks::Dtype dt = task.inputs.empty() ? tasks::Dtype::Float32 : task.inputs.front().dtype;
  t.bytes = bytes;
  t.flops = flops;
  t.floor_ms = roofline_floor_ms(facts, bytes, flops, dt, task.allow_tf32);
  if (t.floor_ms) t.roofline_fraction = *t.floor_ms / t.time.median_ms;
  assess_speed(t);
  t.device = facts.to_json();
  t.clocks = clocks.summary();
  t.math_mode = task.allow_tf32 ? "tf32" : "ieee";
  return t;
}

}  // namespace parts
}  // namespace kforge::verify
