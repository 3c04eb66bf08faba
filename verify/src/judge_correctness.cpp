// The correctness runs (docs/design.md, Verification 2; judge_parts.h): every configuration, its
// seeds, two runs each against the references, and the verdicts on runs that fail.
#include <regex>

#include "judge_parts.h"
#include "kforge/common/strings.h"

namespace kforge::verify::parts {

using nlohmann::json;
using tasks::Dtype;

namespace {

void note_worst(json& worst, const Comparison& cmp, const Config& c, size_t o) {
  double ratio = cmp.threshold > 0 ? cmp.max_abs_error / cmp.threshold : 0;
  if (!worst.is_null() && worst["ratio_to_threshold"].get<double>() >= ratio) return;
  worst = {{"output", c.names[c.inputs + o]},
           {"dims", c.dims},
           {"max_abs_error", cmp.max_abs_error},
           {"max_rel_error", cmp.max_rel_error},
           {"normalized_error", cmp.normalized_error},
           {"threshold", cmp.threshold},
           {"ratio_to_threshold", ratio}};
}

// One seed of configuration `c`: run 1 (NaN poison), the references, run 2 (random finite
// poison), then the comparisons. nullopt: correct here (`found` gains its worst error, a bitwise
// instability and, on the timed dims, the set for the timing pool).
std::optional<Verdict> check_seed(Verification& j, Config& c, Place at, Correctness& found) {
  json& evidence = j.evidence;
  Clock::time_point step = Clock::now();
  std::vector<torch::Tensor> inputs = draw_inputs(j, c.dims, at.seed, at.variant);
  note_step(evidence, "draw", step);
  // Run 1: NaN poison, before the reference exists.
  at.run = 1;
  prepare_run(c, inputs, Poison::NaN, at.seed);
  RunResult r1 = j.runner.run(c.request, j.watchdog);
  if (!r1.ok()) return runner_failure(j, r1, &c, inputs, at);
  if (auto v = after_run(evidence, c, inputs, at.seed, at)) return v;
  std::vector<torch::Tensor> out1;
  for (size_t i = 0; i < c.outputs; ++i) out1.push_back(c.buffers[c.inputs + i]->tensor().clone());
  note_step(evidence, "runs", step);

  std::vector<torch::Tensor> ref_eager = eager(j, inputs);
  std::vector<torch::Tensor> ref64;
  try {
    ref64 = reference64(j, inputs);
  } catch (const std::exception& e) {
    if (is_out_of_memory(e)) throw;  // does_not_fit, not a weaker check
    evidence["reference64"] = std::string("unavailable, eager used instead: ") + e.what();
    for (const torch::Tensor& t : ref_eager) ref64.push_back(t.to(torch::kFloat64));
  }
  note_step(evidence, "references", step);

  // Run 2: random finite poison, after the reference.
  at.run = 2;
  std::vector<torch::Tensor> poison2 = prepare_run(c, inputs, Poison::RandomFinite, at.seed + 1);
  RunResult r2 = j.runner.run(c.request, j.watchdog);
  if (!r2.ok()) return runner_failure(j, r2, &c, inputs, at);
  if (auto v = after_run(evidence, c, inputs, at.seed + 1, at)) return v;
  note_step(evidence, "runs", step);

  PoolSet kept{inputs, ref_eager, {}};
  for (size_t o = 0; o < c.outputs; ++o) {
    const torch::Tensor& out2 = c.buffers[c.inputs + o]->tensor();
    Dtype dt = tasks::from_scalar_type(ref_eager[o].scalar_type()).value_or(Dtype::Float32);
    // A reference may cast its result itself; the fp64 one is compared as float64 all the same.
    torch::Tensor expected = tasks::is_floating(dt) ? ref64[o].to(torch::kFloat64) : ref_eager[o];
    double tol = tolerance_for(j.task, o, dt);
    // Run 1 needs its own comparison only where it differs from run 2.
    const bool same = bitwise_equal(out1[o], out2);
    for (int run : same ? std::vector<int>{2} : std::vector<int>{2, 1}) {
      const torch::Tensor& got = run == 2 ? out2 : out1[o];
      Comparison cmp = compare_output(got, expected, ref_eager[o], dt, tol);
      at.run = run;
      if (!cmp.ok) {
        int64_t untouched = 0;
        if (run == 2) {
          torch::Tensor poison1 = torch::empty_like(out1[o]);
          poison(poison1, Poison::NaN, at.seed);  // what run 1 left in an element it did not write
          untouched = untouched_count(out1[o], poison1, got, poison2[o]);
        }
        json e{{"output", c.names[c.inputs + o]},
               {"comparison", cmp.to_json()},
               {"unwritten_elements", untouched}};
        if (untouched > 0)
          return fail(evidence, Outcome::IncompleteOutput,
                      "output '" + c.names[c.inputs + o] + "': " + std::to_string(untouched) +
                          " of " + std::to_string(got.numel()) + " element(s) never written " +
                          at.words(),
                      e, at);
        return fail(evidence, Outcome::WrongResult,
                    "output '" + c.names[c.inputs + o] + "': " + cmp.summary() + " " + at.words(),
                    e, at);
      }
      note_worst(found.worst, cmp, c, o);
      // What a timed repetition on these inputs may differ from eager by (check_timed_outputs):
      // the correctness threshold plus eager's own error.
      if (run == 2)
        kept.allowed.push_back(tasks::is_floating(dt) ? cmp.threshold + cmp.eager_max_abs_error
                                                      : 0.0);
    }
    if (!same) {
      int64_t differ = bitwise_differences(out1[o], out2);
      json e{{"output", c.names[c.inputs + o]}, {"elements_differing", differ}};
      at.run = 2;
      if (j.task.deterministic)
        return fail(evidence, Outcome::Nondeterministic,
                    "output '" + c.names[c.inputs + o] + "' differs bitwise between two runs in " +
                        std::to_string(differ) + " element(s) and the task is deterministic " +
                        at.words(),
                    e, at);
      found.bitwise_unstable = true;
      evidence["bitwise_unstable"] = e;
    }
  }
  // The timed dims' sets become the timing pool: fresh to the timed runs' caches, their eager
  // outputs and thresholds already known. No more than the memory plan keeps.
  if (c.timed && j.options.time &&
      static_cast<int>(found.timed_sets.size()) <
          (j.pool_sets > 0 ? j.pool_sets : j.options.timing.pool))
    found.timed_sets.push_back(std::move(kept));
  note_step(evidence, "compare", step);
  return std::nullopt;
}

// A fault's diagnosis (runner_failure): the run again, inputs writable, under memcheck.
void diagnose(const Verification& j, Verdict& v, json& detail, Config& c,
              const std::vector<torch::Tensor>& inputs, const Place& at) {
  std::string sanitizer =
      j.options.sanitizer ? find_compute_sanitizer(j.options.sanitizer_path) : "";
  std::string log;
  auto t0 = Clock::now();
  try {
    SanitizedRun again =
        run_sanitized(j, sanitizer, "memcheck", c, false, inputs, at.seed,
                      std::max(j.watchdog * 20, std::chrono::milliseconds(120000)));
    detail["diagnosis_run"] = {{"status", to_string(again.result.status)},
                               {"sanitizer", sanitizer.empty() ? "not found" : sanitizer}};
    log = again.log;
  } catch (const std::exception& e) {
    // The diagnosis failed, not the verdict: the candidate keeps its runtime_error.
    detail["diagnosis_error"] = e.what();
  }
  detail["diagnosis_ms"] = ms_since(t0);
  if (!log.empty()) detail["memcheck"] = log.substr(0, 3000);
  for (size_t i = 0; i < c.inputs; ++i)
    if (!bitwise_equal(c.buffers[i]->tensor(), inputs[i])) {
      v.outcome = Outcome::InputModified;
      v.summary = "writes input '" + c.names[i] +
                  "' (mapped read-only, the write faulted: " + v.summary + ")";
      return;
    }
  if (std::optional<Outcome> oob = classify_memcheck_log(log); !oob) {
    for (size_t i = 0; i < c.buffers.size(); ++i)
      for (torch::Tensor slack : c.buffers[i]->slack())
        if (!check_canary(slack, at.seed * 7 + i).ok()) {
          v.outcome = Outcome::OutOfBoundsWrite;
          v.summary = "writes past the end of '" + c.names[i] +
                      "' (canaries overwritten, then a fault: " + v.summary + ")";
          return;
        }
  } else {
    v.outcome = *oob;
    std::smatch m;
    static const std::regex line(
        R"(Invalid __global__ (read|write) of size \d+ bytes?[\s\S]*?is out of bounds[^\n]*\n[^\n]*)");
    v.summary = (std::regex_search(log, m, line)
                     ? std::regex_replace(m.str(), std::regex(R"(\s*=========\s*)"), " ")
                     : std::string(to_string(*oob))) +
                " " + at.words();
  }
}

}  // namespace

std::variant<Correctness, Verdict> check_correctness(Verification& j) {
  Correctness found;
  const tasks::Task& task = j.task;
  for (size_t c = 0; c < j.report.configurations.size(); ++c) {
    const auto& [dims, plan] = j.report.configurations[c];
    int count = dims == task.dims ? j.options.timed_seeds : j.options.check_seeds;
    if (count == 0) continue;
    Clock::time_point step = Clock::now();
    Config config = prepare_config(j, dims, plan, c, dims == task.dims);
    if (config.memory) {
      j.pool_sets = config.memory->sets;
      j.evidence["memory"] = config.memory->to_json();
    }
    RunResult shared = j.runner.set_buffers(specs(config, true), fds(config));
    if (!shared.ok()) throw Error("the runner failed to map the buffers: " + shared.evidence);
    note_step(j.evidence, "buffers", step);
    json seeds = json::array();
    for (int k = 0; k < count; ++k) {
      Place at{&config, j.seed + 100 * c + static_cast<uint64_t>(k), 0, 0};
      at.variant = config.timed ? (k == count - 1 ? 1 : 0) : k % 2;
      if (std::optional<Verdict> v = check_seed(j, config, at, found)) return *v;
      seeds.push_back({{"seed", at.seed}, {"variant", at.variant}});
    }
    config.finite_poison.clear();  // timing poisons with NaN only
    found.configs.push_back({{"dims", dims}, {"timed", config.timed}, {"seeds", seeds}});
    if (config.timed) found.timed = std::move(config);
  }
  return found;
}

Verdict does_not_fit(const json& evidence, const PoolPlan& plan) {
  Verdict v;
  v.outcome = Outcome::DoesNotFit;
  v.summary = plan.shortfall();
  v.evidence = evidence;
  v.evidence["memory"] = plan.to_json();
  return v;
}

Verdict out_of_memory(const json& evidence, const std::string& error, int device) {
  Verdict v;
  v.outcome = Outcome::DoesNotFit;
  v.evidence = evidence;
  std::string first = error.substr(0, error.find('\n'));
  std::string now;
  try {
    DeviceMemory m = device_memory(device);
    now = "; " + std::to_string(m.free) + " bytes (" + format_bytes(m.free) + ") of " +
          format_bytes(m.total) + " are free now";
    v.evidence["memory_after_failure"] = {{"free_bytes", m.free}, {"total_bytes", m.total}};
  } catch (const std::exception&) {
  }
  std::string planned;
  if (evidence.contains("memory") && evidence["memory"].contains("needed_bytes")) {
    const json& m = evidence["memory"];
    uint64_t sets_bytes = m["needs"]["set_bytes"].get<uint64_t>() * m["pool_sets"].get<uint64_t>();
    uint64_t need = m["needed_bytes"].get<uint64_t>() -
                    m["needs"]["set_bytes"].get<uint64_t>() * m["pool_minimum"].get<uint64_t>() +
                    sets_bytes;
    planned = "; the plan counted " + std::to_string(need) + " bytes (" + format_bytes(need) +
              ") for " + m["pool_sets"].dump() + " input set(s) within " +
              format_bytes(m["available_bytes"].get<uint64_t>());
  }
  v.summary = "out of GPU memory at the task's sizes: " + first + planned + now +
              ": the task's sizes do not fit this GPU's memory as it is now";
  v.evidence["error"] = error.substr(0, 4000);
  return v;
}

Verdict fail(const json& evidence, Outcome o, const std::string& summary, json detail,
             const Place& at) {
  Verdict v;
  v.outcome = o;
  v.summary = summary;
  v.evidence = evidence;
  v.evidence["where"] = at.to_json();
  v.evidence["detail"] = std::move(detail);
  return v;
}

Verdict runner_failure(const Verification& j, const RunResult& r, Config* c,
                       const std::vector<torch::Tensor>& inputs, const Place& at) {
  json detail{{"status", to_string(r.status)}, {"runner", r.evidence}};
  if (!r.reply.error.empty()) detail["cuda_error"] = r.reply.error;
  Verdict v;
  v.evidence = j.evidence;
  if (c) v.evidence["where"] = at.to_json();
  std::string where = c ? " " + at.words() : "";
  switch (r.status) {
    case RunStatus::LaunchError:
      v.outcome = Outcome::LaunchError;
      v.summary = r.evidence + where;
      break;
    case RunStatus::Timeout:
      v.outcome = Outcome::Timeout;
      v.summary =
          "no answer within the " + std::to_string(j.watchdog.count()) + " ms watchdog" + where;
      break;
    default:
      v.outcome = Outcome::RuntimeError;
      v.summary = r.evidence + where;
      if (c) diagnose(j, v, detail, *c, inputs, at);
      break;
  }
  v.evidence["detail"] = detail;
  return v;
}

}  // namespace kforge::verify::parts
