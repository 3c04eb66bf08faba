#include "kforge/verify/judge.h"

#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <variant>

#include "kforge/common/files.h"
#include "kforge/common/strings.h"
#include "kforge/tasks/math_mode.h"
#include "kforge/tasks/reference.h"
#include "kforge/verify/clocks.h"
#include "kforge/verify/compare.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/gpu_generator.h"
#include "kforge/verify/device_facts.h"
#include "kforge/verify/shared_buffer.h"
#include "kforge/verify/timing.h"

namespace kforge::verify {

using nlohmann::json;
using tasks::Dtype;
using Clock = std::chrono::steady_clock;

std::chrono::milliseconds default_watchdog(double eager_ms, size_t launches) {
  double ms = 50.0 * eager_ms * static_cast<double>(std::max<size_t>(launches, 1));
  return std::chrono::milliseconds(static_cast<int64_t>(std::clamp(ms, 2000.0, 60000.0)));
}

std::string find_compute_sanitizer(const std::string& hint) {
  std::vector<std::string> places;
  if (!hint.empty()) places.push_back(hint);
  if (const char* path = std::getenv("PATH"))
    for (const std::string& dir : split(path, ':')) places.push_back(dir + "/compute-sanitizer");
  if (const char* home = std::getenv("CUDA_HOME")) places.push_back(std::string(home) + "/bin/compute-sanitizer");
  places.push_back("/usr/local/cuda/bin/compute-sanitizer");
  for (const std::string& p : places)
    if (!p.empty() && ::access(p.c_str(), X_OK) == 0) return p;
  return "";
}

std::optional<Outcome> classify_memcheck_log(const std::string& log) {
  // "Invalid __global__ write of size 4 bytes ... Access to 0x... is out of bounds
  //  ... and is 1 bytes after the nearest allocation at 0x... of size 2,097,152 bytes"
  static const std::regex first(R"(Invalid __global__ (read|write) of size \d+ bytes?)");
  static const std::regex distance(R"(and is ([\d,]+) bytes (after|before) the nearest allocation)");
  std::smatch m;
  if (!std::regex_search(log, m, first)) return std::nullopt;
  std::string rest = log.substr(static_cast<size_t>(m.position(0)));
  std::string block = rest.substr(0, rest.find("Saved host backtrace"));
  std::smatch d;
  if (block.find("out of bounds") == std::string::npos || !std::regex_search(block, d, distance)) return std::nullopt;
  std::string digits;
  for (char ch : d[1].str())
    if (ch != ',') digits += ch;
  // Beside a buffer (within the guard gaps): out of bounds. Far from every buffer: a wild pointer.
  if (digits.size() > 12 || std::stoll(digits) > kNearBufferBytes) return std::nullopt;
  return m[1] == "read" ? Outcome::OutOfBoundsRead : Outcome::OutOfBoundsWrite;
}

std::optional<int64_t> sanitizer_errors(const std::string& log) {
  // memcheck, initcheck: "========= ERROR SUMMARY: 2 errors"
  // racecheck:           "========= RACECHECK SUMMARY: 3 hazards displayed (1 error, 2 warnings)"
  static const std::regex summary(R"(ERROR SUMMARY: ([\d,]+) errors?)");
  static const std::regex race(R"(RACECHECK SUMMARY: [\d,]+ hazards? displayed \(([\d,]+) errors?)");
  std::smatch m;
  if (!std::regex_search(log, m, summary) && !std::regex_search(log, m, race)) return std::nullopt;
  std::string digits;
  for (char ch : m[1].str())
    if (ch != ',') digits += ch;
  return std::stoll(digits);
}

Verdict verdict_from_report(const compile::CandidateReport& report) {
  Verdict v;
  using compile::Stage;
  v.outcome = (report.stage == Stage::Plan || report.stage == Stage::Limits) ? Outcome::PlanError : Outcome::CompileError;
  v.summary = std::string(compile::stage_name(report.stage)) + ": " + (report.errors.empty() ? "?" : report.errors.front());
  v.evidence = {{"stage", compile::stage_name(report.stage)}, {"errors", report.errors}};
  return v;
}

namespace {

void synchronize() {
  const Driver& d = Driver::get();
  KFORGE_CU_CHECK(d, d.cuCtxSynchronize());
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Everything one configuration needs: its buffers (the plan's tensors, in plan order), the
// request the runner gets, and the reference's output shapes.
struct Config {
  tasks::Dims dims;
  bool timed = false;
  std::vector<std::unique_ptr<SharedBuffer>> buffers;
  size_t inputs = 0, outputs = 0;
  RunRequest request;
  std::vector<std::string> names;
  std::map<size_t, torch::Tensor> finite_poison;  // by buffer: large buffers' random finite poison (prepare_run)
};

inline constexpr int64_t kCachedPoisonElements = int64_t{1} << 20;

// Where a verdict was reached: dims, seed, distribution and which of the two runs.
struct Place {
  const Config* config = nullptr;
  uint64_t seed = 0;
  int variant = 0;
  int run = 0;
  json to_json() const {
    return {{"dims", config->dims}, {"timed", config->timed}, {"seed", seed}, {"variant", variant}, {"run", run}};
  }
  std::string words() const {
    return "at dims " + tasks::format_dims(config->dims) + ", seed " + std::to_string(seed) +
           (variant ? " (second distribution)" : "") + ", run " + std::to_string(run);
  }
};

// Eager: TorchScript's graph optimizer off; scripted: on (its fuser, after profiling runs).
// TF32 off for cuBLAS and cuDNN unless the task allows it.
std::vector<torch::Tensor> run_reference(const tasks::Task& task, const tasks::Reference& ref,
                                         const std::vector<torch::Tensor>& inputs, bool scripted) {
  tasks::MathModeGuard mode(task.allow_tf32);
  torch::jit::GraphOptimizerEnabledGuard optimizer(scripted);
  return ref.run(inputs);
}

// Eager and scripted, timed like candidates: the pool's sets copied into the same tensors, then
// hold, flush, events around the call, release.
Baselines time_references(const tasks::Task& task, const tasks::Reference& ref,
                          const std::vector<std::vector<torch::Tensor>>& pool, TimingGate& gate, const TimingOptions& o,
                          ClockMonitor& clocks) {
  std::vector<torch::Tensor> fixed;
  for (const torch::Tensor& in : pool.at(0)) fixed.push_back(in.clone());
  Baselines b;
  b.math_mode = task.allow_tf32 ? "tf32" : "ieee";
  for (bool scripted : {false, true}) {
    EventTimer timer(&gate);
    TimingOptions bo = o;
    if (scripted) bo.warmups = std::max(bo.warmups, 5);  // the profiling executor optimises after 2 runs
    TimeStats s = time_repeatedly(
        [&](int rep) {
          const auto& set = pool[static_cast<size_t>(rep) % pool.size()];
          for (size_t i = 0; i < fixed.size(); ++i) fixed[i].copy_(set[i]);
          synchronize();
        },
        [&](int) {
          timer.start();
          run_reference(task, ref, fixed, scripted);
          double ms = timer.stop_ms();
          clocks.sample();
          return ms;
        },
        [](int) {}, bo);
    s.held = timer.held();
    (scripted ? b.scripted : b.eager) = s;
  }
  return b;
}

}  // namespace

struct Judge::Session {
  std::unique_ptr<TimingGate> gate_;
  struct Timed {
    Baselines baselines;
    Clock::time_point at;
  };
  std::map<std::string, Timed> baselines;  // by task version, dims and math mode
  std::map<std::string, std::unique_ptr<tasks::Reference>> references;  // by task version

  TimingGate& gate(int device) {
    if (!gate_) gate_ = std::make_unique<TimingGate>(device);
    return *gate_;
  }
  // A task's reference, compiled once per judge session (the dims do not change the code).
  const tasks::Reference& reference(const tasks::Task& task) {
    std::unique_ptr<tasks::Reference>& r = references[task.content_hash];
    if (!r) r = std::make_unique<tasks::Reference>(tasks::Reference::compile(task));
    return *r;
  }
};

namespace {

class Verification {
 public:
  Verification(const VerifyOptions& options, RunnerClient& runner, Judge::Session& session, const tasks::Task& task,
               const compile::CandidateReport& report)
      : options_(options), runner_(runner), session_(session), task_(task), report_(report),
        reference_(session.reference(task)) {
    static std::random_device rd;
    seed_ = options.seed ? *options.seed : 1 + rd() % 1000000000u;
    image_.cubin = report.module.cubin;
    for (const auto& k : report.kernels) image_.kernels.push_back(k.lowered);
    image_.globals = ptx_global_variables(report.module.ptx);
    evidence_ = {{"seed", seed_}, {"harness_version", kHarnessVersion}, {"globals_reset", image_.globals}};
  }

  Verdict run() {
    RunResult loaded = runner_.set_module(image_);
    if (loaded.status == RunStatus::LaunchError) return runner_failure(loaded, nullptr);  // the driver refused the module
    if (!loaded.ok()) throw Error("the runner failed while loading the module, before any candidate code ran: " + loaded.evidence);
    Clock::time_point phase = Clock::now();
    eager_ms_ = time_eager();
    note_phase("eager_probe", phase);
    size_t launches = report_.configurations.empty() ? 1 : report_.configurations.front().second.launches.size();
    watchdog_ = options_.watchdog ? *options_.watchdog : default_watchdog(eager_ms_, launches);
    evidence_["toolchain"] = toolchain(options_.device);
    evidence_["eager_ms"] = eager_ms_;
    evidence_["watchdog_ms"] = watchdog_.count();
    json configs = json::array();
    std::optional<Config> timed;
    for (size_t c = 0; c < report_.configurations.size(); ++c) {
      const auto& [dims, plan] = report_.configurations[c];
      int count = dims == task_.dims ? options_.timed_seeds : options_.check_seeds;
      if (count == 0) continue;
      Clock::time_point step = Clock::now();
      Config config = prepare(dims, plan, c);
      RunResult shared = runner_.set_buffers(specs(config, true), fds(config));
      if (!shared.ok()) throw Error("the runner failed to map the buffers: " + shared.evidence);
      note_step("buffers", step);
      json seeds = json::array();
      for (int k = 0; k < count; ++k) {
        Place at{&config, seed_ + 100 * c + static_cast<uint64_t>(k), 0, 0};
        at.variant = config.timed ? (k == count - 1 ? 1 : 0) : k % 2;
        if (std::optional<Verdict> v = check_seed(config, at)) return *v;
        seeds.push_back({{"seed", at.seed}, {"variant", at.variant}});
      }
      config.finite_poison.clear();  // timing poisons with NaN only
      configs.push_back({{"dims", dims}, {"timed", config.timed}, {"seeds", seeds}});
      if (config.timed) timed = std::move(config);
    }
    note_phase("correctness", phase);
    evidence_["configs"] = configs;
    evidence_["worst"] = worst_;
    std::optional<TimingResult> timing;
    if (options_.time && timed) {
      std::variant<TimingResult, Verdict> t = time_candidate(*timed);
      if (std::holds_alternative<Verdict>(t)) return std::get<Verdict>(t);
      timing = std::get<TimingResult>(t);
      if (timing->suspicious) flags_.insert(kFlagSuspicious);
      if (timing->clocks.value("slowed", false)) flags_.insert(kFlagClockSlowdown);
      evidence_["timing"] = timing->to_json();
    }
    Verdict v;
    v.timing = timing;
    v.outcome = flags_.count(kFlagBitwiseUnstable) && task_.deterministic ? Outcome::Nondeterministic : Outcome::Correct;
    v.flags.assign(flags_.begin(), flags_.end());
    v.evidence = evidence_;
    size_t runs = 0;
    for (const auto& c : configs) runs += c["seeds"].size() * 2;
    v.summary = "correct on " + std::to_string(configs.size()) + " configuration(s), " +
                std::to_string(runs) + " runs; worst normalized error " +
                (worst_.is_null() ? std::string("0") : worst_["normalized_error"].dump()) +
                (v.flags.empty() ? "" : " (flags: " + join(v.flags, ", ") + ")");
    return v;
  }

 private:
  std::vector<torch::Tensor> draw_inputs(const tasks::Dims& dims, uint64_t seed, int variant) {
    std::vector<torch::Tensor> out;
    for (size_t i = 0; i < task_.inputs.size(); ++i)
      out.push_back(generate_cuda(task_, i, dims, seed, variant, options_.device));
    return out;
  }

  // Eager: TorchScript's graph optimizer off; scripted: on (its fuser, after profiling runs).
  // TF32 off for cuBLAS and cuDNN unless the task allows it.
  std::vector<torch::Tensor> eager(const std::vector<torch::Tensor>& inputs, bool scripted = false) {
    return run_reference(task_, reference_, inputs, scripted);
  }

  // The reference in float64: floating inputs widened (exactly), integer inputs as they are.
  std::vector<torch::Tensor> reference64(const std::vector<torch::Tensor>& inputs) {
    std::vector<torch::Tensor> wide;
    for (const torch::Tensor& t : inputs) wide.push_back(t.is_floating_point() ? t.to(torch::kFloat64) : t);
    return eager(wide);
  }

  // tol of the acceptance formula for output `o`: the task's own, else the dtype's default.
  double tolerance_for(size_t o, tasks::Dtype dt) const {
    if (o < task_.outputs.size() && task_.outputs[o].tolerance) return *task_.outputs[o].tolerance;
    return default_tolerance(dt);
  }

 public:
  // Admission's sanitizer passes (docs/design.md, Verification 6): memcheck, initcheck and
  // racecheck each run the plan once, in a runner of their own, on the configuration with the
  // fewest input bytes. nullopt: every tool clean (or compute-sanitizer absent, said in `record`).
  std::optional<Verdict> sanitize(json& record) {
    std::string tool_path = find_compute_sanitizer(options_.sanitizer_path);
    record["sanitizers"] = json::array();
    if (tool_path.empty()) {
      record["sanitizer_path"] = "compute-sanitizer not found: no sanitizer passes";
      return std::nullopt;
    }
    size_t smallest = 0;
    for (size_t i = 1; i < report_.configurations.size(); ++i)
      if (task_.input_bytes(report_.configurations[i].first) < task_.input_bytes(report_.configurations[smallest].first))
        smallest = i;
    const auto& [dims, plan] = report_.configurations[smallest];
    Config c = prepare(dims, plan, smallest);
    Place at{&c, seed_ + 7, 0, 1};
    std::vector<torch::Tensor> inputs = draw_inputs(dims, at.seed, 0);
    for (const char* tool : {"memcheck", "initcheck", "racecheck"}) {
      SanitizedRun run = run_sanitized(tool_path, tool, c, true, inputs, at.seed, std::chrono::seconds(120));
      const RunResult& r = run.result;
      const std::string& log = run.log;
      json entry{{"tool", tool}, {"dims", dims}, {"status", to_string(r.status)}, {"ms", run.ms}};
      int64_t errors = sanitizer_errors(log).value_or(-1);
      entry["errors"] = errors;
      if (errors != 0 || !r.ok()) entry["log"] = log.substr(0, 3000);
      record["sanitizers"].push_back(entry);
      if (errors > 0 || !r.ok()) {
        Verdict v;
        std::string what = std::string(tool) + " found " + (errors > 0 ? std::to_string(errors) + " error(s)" : "a failed run (" + r.evidence + ")");
        if (std::string(tool) == "memcheck") {
          v.outcome = classify_memcheck_log(log).value_or(Outcome::RuntimeError);
        } else if (std::string(tool) == "initcheck") {
          v.outcome = Outcome::WrongResult;
          what += ": the kernel reads memory nothing wrote";
        } else {
          v.outcome = Outcome::Nondeterministic;
          what += ": a shared-memory race";
        }
        v.summary = what + " " + at.words();
        v.evidence = evidence_;
        v.evidence["where"] = at.to_json();
        v.evidence["detail"] = entry;
        return v;
      }
      if (errors < 0) entry["note"] = "the tool gave no summary";
    }
    return std::nullopt;
  }

 private:
  // One run of `c` (its inputs restored from `inputs`, NaN poison) in a runner of its own under
  // compute-sanitizer's `tool` (no wrapper when `tool_path` is empty): what admission's sanitizer
  // passes and a fault's diagnosis both need. The runner then exits, giving the tool a minute to
  // write its summary; the log is read by path (the tool rewrites the file).
  struct SanitizedRun {
    RunResult result;
    std::string log;
    double ms = 0;
  };
  SanitizedRun run_sanitized(const std::string& tool_path, const char* tool, Config& c, bool inputs_read_only,
                             const std::vector<torch::Tensor>& inputs, uint64_t seed, std::chrono::milliseconds limit) {
    RunnerOptions o = options_.runner;
    o.device = options_.device;
    char log_path[] = "/tmp/kforge-sanitizer-XXXXXX";
    UniqueFd log_fd(::mkstemp(log_path));
    if (!tool_path.empty() && log_fd)
      o.wrapper = {tool_path, "--tool", tool, "--log-file", log_path, "--print-limit", "8"};
    SanitizedRun out;
    auto t0 = Clock::now();
    {
      RunnerClient client(o);
      RunResult shared = client.set_buffers(specs(c, inputs_read_only), fds(c));
      RunResult loaded = shared.ok() ? client.set_module(image_) : shared;
      prepare_run(c, inputs, Poison::NaN, seed);
      out.result = loaded.ok() ? client.run(c.request, limit) : loaded;
      client.stop(std::chrono::seconds(60));
    }
    out.ms = ms_since(t0);
    if (log_fd) {
      out.log = read_file(log_path).value_or("");
      ::unlink(log_path);
    }
    return out;
  }

  // Where the judge's time goes, in the evidence (issue 6's latency budget).
  void note_phase(const char* name, Clock::time_point& since) {
    evidence_["phase_ms"][name] = ms_since(since);
    since = Clock::now();
  }
  // The correctness phase's time by step (draw, runs, references, compare), summed over seeds; a
  // step's time includes waiting for the GPU work queued before it.
  void note_step(const char* name, Clock::time_point& since) {
    synchronize();
    json& slot = evidence_["correctness_split_ms"][name];
    slot = (slot.is_null() ? 0.0 : slot.get<double>()) + ms_since(since);
    since = Clock::now();
  }

  double time_eager() {
    std::vector<torch::Tensor> in = draw_inputs(task_.dims, seed_ + 99, 0);
    eager(in);
    synchronize();
    auto t0 = Clock::now();
    eager(in);
    synchronize();
    return ms_since(t0);
  }

  Config prepare(const tasks::Dims& dims, const compile::ConcretePlan& plan, size_t index) {
    Config c;
    c.dims = dims;
    c.timed = dims == task_.dims;
    // The reference's outputs on inputs no candidate run sees give the output shapes.
    std::vector<torch::Tensor> probe = eager(draw_inputs(dims, seed_ + 100 * index + 99, 0));
    std::vector<std::string> out_names = tasks::output_names(task_, probe.size());
    for (size_t i = 0; i < task_.inputs.size(); ++i) {
      const tasks::InputSpec& in = task_.inputs[i];
      c.buffers.push_back(std::make_unique<SharedBuffer>(in.name, task_.shape_of(in, dims),
                                                         tasks::to_scalar_type(in.dtype), true, options_.device));
      c.names.push_back(in.name);
    }
    c.inputs = c.buffers.size();
    for (size_t i = 0; i < probe.size(); ++i) {
      c.buffers.push_back(std::make_unique<SharedBuffer>(out_names[i], probe[i].sizes().vec(), probe[i].scalar_type(),
                                                         false, options_.device));
      c.names.push_back(out_names[i]);
    }
    c.outputs = probe.size();
    for (const compile::ConcreteWorkspace& w : plan.workspaces) {
      c.buffers.push_back(std::make_unique<SharedBuffer>(w.name, std::vector<int64_t>{w.count},
                                                         tasks::to_scalar_type(w.dtype), false, options_.device));
      c.names.push_back(w.name);
      if (w.zero_init) c.request.zero_buffers.push_back(static_cast<int>(c.buffers.size() - 1));
    }
    for (const compile::ConcreteLaunch& l : plan.launches) {
      LaunchSpecWire w;
      for (size_t k = 0; k < report_.kernels.size(); ++k)
        if (report_.kernels[k].name == l.kernel) w.kernel = static_cast<int>(k);
      const std::vector<compile::ParamType>& params = report_.kernels.at(static_cast<size_t>(w.kernel)).params;
      w.grid = l.grid, w.block = l.block, w.cluster = l.cluster;
      w.shared_bytes = l.shared_bytes;
      w.cooperative = l.cooperative;
      for (size_t a = 0; a < l.args.size(); ++a) {
        LaunchArg arg;
        if (l.args[a].is_tensor) {
          arg.buffer = static_cast<int>(std::find(c.names.begin(), c.names.end(), l.args[a].tensor) - c.names.begin());
        } else {
          arg.value = l.args[a].value;
          arg.bytes = a < params.size() && params[a].bits == 32 ? 4 : 8;
        }
        w.args.push_back(arg);
      }
      c.request.launches.push_back(std::move(w));
    }
    return c;
  }

  std::vector<BufferSpec> specs(const Config& c, bool inputs_read_only) const {
    std::vector<BufferSpec> out;
    for (const auto& b : c.buffers) {
      BufferSpec s = b->spec();
      s.read_only = s.read_only && inputs_read_only;
      out.push_back(s);
    }
    return out;
  }
  static std::vector<int> fds(const Config& c) {
    std::vector<int> out;
    for (const auto& b : c.buffers) out.push_back(b->fd());
    return out;
  }

  // Outputs and workspaces poisoned, canaries laid, inputs restored from `inputs`. Returns the
  // outputs' random finite poison (empty for NaN poison: untouched elements are found as NaN).
  std::vector<torch::Tensor> prepare_run(Config& c, const std::vector<torch::Tensor>& inputs, Poison kind, uint64_t seed) {
    std::vector<torch::Tensor> poisoned;
    for (size_t i = 0; i < c.buffers.size(); ++i) {
      torch::Tensor& t = c.buffers[i]->tensor();
      if (i < c.inputs) {
        t.copy_(inputs[i]);
      } else if (kind == Poison::RandomFinite && t.numel() >= kCachedPoisonElements) {
        // A large buffer's random finite poison is drawn once per configuration (the draw, ~15
        // float64 kernels a chunk, costs more than a level-1 run); small ones get a fresh draw per
        // seed, so a kernel that reads its output can't count on one lucky poison.
        torch::Tensor& cached = c.finite_poison[i];
        if (!cached.defined()) {
          cached = torch::empty_like(t);
          poison(cached, kind, seed * 131 + i);
        }
        t.copy_(cached);
        if (i < c.inputs + c.outputs) poisoned.push_back(cached);
      } else {
        poison(t, kind, seed * 131 + i);
        if (kind == Poison::RandomFinite && i < c.inputs + c.outputs) poisoned.push_back(t.clone());
      }
      for (torch::Tensor s : c.buffers[i]->slack()) fill_canary(s, seed * 7 + i);
    }
    synchronize();
    return poisoned;
  }

  std::optional<Verdict> after_run(Config& c, const std::vector<torch::Tensor>& inputs, uint64_t seed, const Place& at) {
    for (size_t i = 0; i < c.buffers.size(); ++i) {
      std::vector<torch::Tensor> slack = c.buffers[i]->slack();
      for (size_t side = 0; side < slack.size(); ++side) {
        CanaryCheck k = check_canary(slack[side], seed * 7 + i);
        if (k.ok()) continue;
        // The first changed byte: before the tensor, the farthest from its start; after it, the nearest
        // to its end.
        int64_t distance = side == 0 ? static_cast<int64_t>(slack[0].numel()) - k.first_offset : k.first_offset + 1;
        return fail(Outcome::OutOfBoundsWrite,
                    std::to_string(k.overwritten) + " byte(s) " + (side == 0 ? "before" : "after") + " '" + c.names[i] +
                        "' overwritten (" + (side == 0 ? "reaching " : "from ") + std::to_string(distance) + " byte(s) " +
                        (side == 0 ? "before its start" : "past its end") + ") " + at.words(),
                    {{"buffer", c.names[i]}, {"side", side == 0 ? "before" : "after"}, {"bytes_overwritten", k.overwritten},
                     {side == 0 ? "farthest_distance_bytes" : "nearest_distance_bytes", distance}},
                    at);
      }
    }
    for (size_t i = 0; i < c.inputs; ++i) {
      if (bitwise_equal(c.buffers[i]->tensor(), inputs[i])) continue;
      int64_t changed = bitwise_differences(c.buffers[i]->tensor(), inputs[i]);
      return fail(Outcome::InputModified,
                  "input '" + c.names[i] + "' changed in " + std::to_string(changed) + " element(s) " + at.words(),
                  {{"input", c.names[i]}, {"elements_changed", changed}}, at);
    }
    return std::nullopt;
  }

  std::optional<Verdict> check_seed(Config& c, Place at) {
    Clock::time_point step = Clock::now();
    std::vector<torch::Tensor> inputs = draw_inputs(c.dims, at.seed, at.variant);
    note_step("draw", step);
    // Run 1: NaN poison, before the reference exists.
    at.run = 1;
    prepare_run(c, inputs, Poison::NaN, at.seed);
    RunResult r1 = runner_.run(c.request, watchdog_);
    if (!r1.ok()) return runner_failure(r1, &c, inputs, at);
    if (auto v = after_run(c, inputs, at.seed, at)) return v;
    std::vector<torch::Tensor> out1;
    for (size_t i = 0; i < c.outputs; ++i) out1.push_back(c.buffers[c.inputs + i]->tensor().clone());
    note_step("runs", step);

    std::vector<torch::Tensor> ref_eager = eager(inputs);
    std::vector<torch::Tensor> ref64;
    try {
      ref64 = reference64(inputs);
    } catch (const std::exception& e) {
      evidence_["reference64"] = std::string("unavailable, eager used instead: ") + e.what();
      for (const torch::Tensor& t : ref_eager) ref64.push_back(t.to(torch::kFloat64));
    }
    note_step("references", step);

    // Run 2: random finite poison, after the reference.
    at.run = 2;
    std::vector<torch::Tensor> poison2 = prepare_run(c, inputs, Poison::RandomFinite, at.seed + 1);
    RunResult r2 = runner_.run(c.request, watchdog_);
    if (!r2.ok()) return runner_failure(r2, &c, inputs, at);
    if (auto v = after_run(c, inputs, at.seed + 1, at)) return v;
    note_step("runs", step);

    PoolSet kept{inputs, ref_eager, {}};
    for (size_t o = 0; o < c.outputs; ++o) {
      const torch::Tensor& out2 = c.buffers[c.inputs + o]->tensor();
      Dtype dt = tasks::from_scalar_type(ref_eager[o].scalar_type()).value_or(Dtype::Float32);
      // A reference may cast its result itself; the fp64 one is compared as float64 all the same.
      torch::Tensor expected = tasks::is_floating(dt) ? ref64[o].to(torch::kFloat64) : ref_eager[o];
      double tol = tolerance_for(o, dt);
      // Run 1 needs its own comparison only where it differs from run 2.
      const bool same = bitwise_equal(out1[o], out2);
      for (int run : same ? std::vector<int>{2} : std::vector<int>{2, 1}) {
        const torch::Tensor& got = run == 2 ? out2 : out1[o];
        Comparison cmp = compare_output(got, expected, ref_eager[o], dt, tol);
        at.run = run;
        if (!cmp.ok) {
          int64_t untouched = run == 2 ? untouched_count(got, poison2[o]) : 0;
          json e{{"output", c.names[c.inputs + o]}, {"comparison", cmp.to_json()}, {"unwritten_elements", untouched}};
          if (untouched > 0)
            return fail(Outcome::IncompleteOutput,
                        "output '" + c.names[c.inputs + o] + "': " + std::to_string(untouched) + " of " +
                            std::to_string(got.numel()) + " element(s) never written " + at.words(),
                        e, at);
          return fail(Outcome::WrongResult, "output '" + c.names[c.inputs + o] + "': " + cmp.summary() + " " + at.words(), e, at);
        }
        note_worst(cmp, c, o);
        // What a timed repetition on these inputs may differ from eager by (check_timed_outputs):
        // the correctness threshold plus eager's own error.
        if (run == 2) kept.allowed.push_back(tasks::is_floating(dt) ? cmp.threshold + cmp.eager_max_abs_error : 0.0);
      }
      if (!same) {
        int64_t differ = bitwise_differences(out1[o], out2);
        json e{{"output", c.names[c.inputs + o]}, {"elements_differing", differ}};
        at.run = 2;
        if (task_.deterministic)
          return fail(Outcome::Nondeterministic,
                      "output '" + c.names[c.inputs + o] + "' differs bitwise between two runs in " + std::to_string(differ) +
                          " element(s) and the task is deterministic " + at.words(),
                      e, at);
        flags_.insert(kFlagBitwiseUnstable);
        evidence_["bitwise_unstable"] = e;
      }
    }
    // The timed dims' sets become the timing pool: fresh to the timed runs' caches, their eager
    // outputs and thresholds already known.
    if (c.timed && options_.time) timed_sets_.push_back(std::move(kept));
    note_step("compare", step);
    return std::nullopt;
  }

  // A timing input set and what its outputs must be: eager's, within the correctness threshold
  // plus eager's own error (so a candidate that passed correctness is never rejected here, and a
  // kernel that behaves differently while timed is caught).
  struct PoolSet {
    std::vector<torch::Tensor> inputs, eager;
    std::vector<double> allowed;  // max |c - eager| per output; 0: bitwise equal (integers)
  };
  struct TimedFailure {
    RunResult result;
  };
  struct TimedWrong {
    std::string summary;
    json detail;
  };

  // docs/design.md, Verification 3-5: the candidate on the timed dims over a pool of input sets,
  // then eager and scripted the same way in this session, then the roofline floor.
  std::variant<TimingResult, Verdict> time_candidate(Config& c) {
    const TimingOptions& o = options_.timing;
    Clock::time_point phase = Clock::now();
    RunResult shared = runner_.set_buffers(specs(c, true), fds(c));
    if (!shared.ok()) throw Error("the runner failed to map the buffers: " + shared.evidence);
    std::vector<PoolSet> pool = std::move(timed_sets_);
    timed_sets_.clear();
    for (int k = 0; static_cast<int>(pool.size()) < o.pool; ++k) {
      PoolSet p;
      p.inputs = draw_inputs(c.dims, seed_ + 50 + static_cast<uint64_t>(k), 0);
      std::vector<torch::Tensor> e = eager(p.inputs), r64 = reference64(p.inputs);
      for (size_t i = 0; i < e.size(); ++i) {
        tasks::Dtype dt = tasks::from_scalar_type(e[i].scalar_type()).value_or(tasks::Dtype::Float32);
        double allowed = 0;
        if (tasks::is_floating(dt)) {
          Comparison self = compare_output(e[i], r64[i].to(torch::kFloat64), e[i], dt, tolerance_for(i, dt));
          allowed = self.threshold + self.max_abs_error;
        }
        p.eager.push_back(e[i]);
        p.allowed.push_back(allowed);
      }
      pool.push_back(std::move(p));
    }
    note_phase("timing_pool", phase);
    RunRequest request = c.request;
    request.timed = true;
    auto set_of = [&](int rep) -> PoolSet& { return pool[static_cast<size_t>(rep) % pool.size()]; };

    TimingResult t;
    bool held = true;
    ClockMonitor clocks = clock_monitor(options_.device);
    try {
      TimeStats candidate = time_repeatedly(
          [&](int rep) {
            for (size_t i = 0; i < c.inputs; ++i) c.buffers[i]->tensor().copy_(set_of(rep).inputs[i]);
            for (size_t i = c.inputs; i < c.buffers.size(); ++i) poison(c.buffers[i]->tensor(), Poison::NaN, 0);
            synchronize();  // the runner holds its stream, flushes the L2 and times (timing_gate.h)
          },
          [&](int) {
            RunResult r = runner_.run(request, watchdog_);
            if (!r.ok()) throw TimedFailure{r};
            if (r.reply.hold_timed_out) held = false;
            clocks.sample();  // right after the GPU finished: the clock it ran at
            return r.reply.gpu_ms;
          },
          [&](int rep) { check_timed_outputs(c, set_of(rep), rep); }, o);
      t.time = candidate;
      t.time.held = held;
      note_phase("timing_candidate", phase);
    } catch (const TimedFailure& f) {
      Place at{&c, seed_ + 50, 0, 3};
      return runner_failure(f.result, &c, set_of(0).inputs, at);
    } catch (const TimedWrong& w) {
      Place at{&c, seed_ + 50, 0, 3};
      return fail(Outcome::WrongResult, w.summary + " (while timing)", w.detail, at);
    }

    if (options_.baselines) {
      Baselines b = baselines(c, pool, clocks);
      note_phase("baselines", phase);
      t.eager = b.eager;
      t.scripted = b.scripted;
      t.speedup_eager = t.eager.median_ms / t.time.median_ms;
      t.speedup_scripted = t.scripted.median_ms / t.time.median_ms;
    }

    MeasuredFacts facts = device_facts(options_.device);
    // Inputs and outputs once (their real sizes: meta shapes are unknown for some ops), or the
    // task's min_bytes.
    double moved = static_cast<double>(task_.input_bytes(c.dims));
    for (size_t o = 0; o < c.outputs; ++o) moved += static_cast<double>(c.buffers[c.inputs + o]->tensor().nbytes());
    std::optional<double> bytes = task_.min_bytes ? task_.min_bytes->eval_real(c.dims) : moved;
    std::optional<double> flops;
    if (task_.flops) flops = task_.flops->eval_real(c.dims);
    tasks::Dtype dt = task_.inputs.empty() ? tasks::Dtype::Float32 : task_.inputs.front().dtype;
    t.bytes = bytes;
    t.flops = flops;
    t.floor_ms = roofline_floor_ms(facts, bytes, flops, dt);
    if (t.floor_ms) t.roofline_fraction = *t.floor_ms / t.time.median_ms;
    assess_speed(t);
    t.device = facts.to_json();
    t.clocks = clocks.summary();
    t.math_mode = task_.allow_tf32 ? "tf32" : "ieee";
    return t;
  }

  // Eager and scripted on the timed dims: timed now, or reused from this judge's last timing of
  // the same task version, dims and math mode within options.baseline_reuse.
  Baselines baselines(const Config& c, const std::vector<PoolSet>& pool, ClockMonitor& clocks) {
    std::string key = task_.content_hash + " " + tasks::format_dims(c.dims) + (task_.allow_tf32 ? " tf32" : " ieee");
    auto it = session_.baselines.find(key);
    if (it != session_.baselines.end() && Clock::now() - it->second.at < options_.baseline_reuse) {
      evidence_["baselines_reused_from_s_ago"] = std::chrono::duration<double>(Clock::now() - it->second.at).count();
      return it->second.baselines;
    }
    std::vector<std::vector<torch::Tensor>> inputs;
    for (const PoolSet& p : pool) inputs.push_back(p.inputs);
    Baselines b = time_references(task_, reference_, inputs, session_.gate(options_.device), options_.timing, clocks);
    session_.baselines[key] = {b, Clock::now()};
    return b;
  }

  void check_timed_outputs(Config& c, const PoolSet& set, int rep) {
    for (size_t o = 0; o < c.outputs; ++o) {
      const torch::Tensor& out = c.buffers[c.inputs + o]->tensor();
      double worst = 0;
      bool ok = set.allowed[o] == 0 ? torch::equal(out, set.eager[o])
                                    : (worst = max_abs_difference(out, set.eager[o])) <= set.allowed[o];
      if (!ok)
        throw TimedWrong{"output '" + c.names[c.inputs + o] + "' differs from eager's by " + std::to_string(worst) +
                             " (allowed " + std::to_string(set.allowed[o]) + ") at timed repetition " + std::to_string(rep),
                         {{"output", c.names[c.inputs + o]}, {"repetition", rep}, {"max_abs_difference", worst},
                          {"allowed", set.allowed[o]}}};
    }
  }

  void note_worst(const Comparison& cmp, const Config& c, size_t o) {
    double ratio = cmp.threshold > 0 ? cmp.max_abs_error / cmp.threshold : 0;
    if (!worst_.is_null() && worst_["ratio_to_threshold"].get<double>() >= ratio) return;
    worst_ = {{"output", c.names[c.inputs + o]}, {"dims", c.dims},       {"max_abs_error", cmp.max_abs_error},
              {"max_rel_error", cmp.max_rel_error}, {"normalized_error", cmp.normalized_error},
              {"threshold", cmp.threshold}, {"ratio_to_threshold", ratio}};
  }

  Verdict fail(Outcome o, const std::string& summary, json detail, const Place& at) {
    Verdict v;
    v.outcome = o;
    v.summary = summary;
    v.evidence = evidence_;
    v.evidence["where"] = at.to_json();
    v.evidence["detail"] = std::move(detail);
    return v;
  }

  // A run that did not finish: launch refused, fault, hang, crash. Faults are diagnosed by
  // running again with inputs writable (does it change them?) under compute-sanitizer memcheck
  // (does it touch memory outside its buffers?).
  Verdict runner_failure(const RunResult& r, Config* c, const std::vector<torch::Tensor>& inputs = {}, const Place& at = {}) {
    json detail{{"status", to_string(r.status)}, {"runner", r.evidence}};
    if (!r.reply.error.empty()) detail["cuda_error"] = r.reply.error;
    Verdict v;
    v.evidence = evidence_;
    if (c) v.evidence["where"] = at.to_json();
    std::string where = c ? " " + at.words() : "";
    switch (r.status) {
      case RunStatus::LaunchError:
        v.outcome = Outcome::LaunchError;
        v.summary = r.evidence + where;
        break;
      case RunStatus::Timeout:
        v.outcome = Outcome::Timeout;
        v.summary = "no answer within the " + std::to_string(watchdog_.count()) + " ms watchdog" + where;
        break;
      default:
        v.outcome = Outcome::RuntimeError;
        v.summary = r.evidence + where;
        if (c) diagnose(v, detail, *c, inputs, at);
        break;
    }
    v.evidence["detail"] = detail;
    return v;
  }

  void diagnose(Verdict& v, json& detail, Config& c, const std::vector<torch::Tensor>& inputs, const Place& at) {
    std::string sanitizer = options_.sanitizer ? find_compute_sanitizer(options_.sanitizer_path) : "";
    std::string log;
    auto t0 = Clock::now();
    try {
      SanitizedRun again = run_sanitized(sanitizer, "memcheck", c, false, inputs, at.seed,
                                         std::max(watchdog_ * 20, std::chrono::milliseconds(120000)));
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
        v.summary = "writes input '" + c.names[i] + "' (mapped read-only, the write faulted: " + v.summary + ")";
        return;
      }
    if (std::optional<Outcome> oob = classify_memcheck_log(log); !oob) {
      for (size_t i = 0; i < c.buffers.size(); ++i)
        for (torch::Tensor slack : c.buffers[i]->slack())
          if (!check_canary(slack, at.seed * 7 + i).ok()) {
            v.outcome = Outcome::OutOfBoundsWrite;
            v.summary = "writes past the end of '" + c.names[i] + "' (canaries overwritten, then a fault: " + v.summary + ")";
            return;
          }
    } else {
      v.outcome = *oob;
      std::smatch m;
      static const std::regex line(R"(Invalid __global__ (read|write) of size \d+ bytes?[\s\S]*?is out of bounds[^\n]*\n[^\n]*)");
      v.summary = (std::regex_search(log, m, line) ? std::regex_replace(m.str(), std::regex(R"(\s*=========\s*)"), " ")
                                                     : std::string(to_string(*oob))) +
                  " " + at.words();
    }
  }

  const VerifyOptions& options_;
  RunnerClient& runner_;
  Judge::Session& session_;
  const tasks::Task& task_;
  const compile::CandidateReport& report_;
  const tasks::Reference& reference_;
  uint64_t seed_ = 1;
  ModuleImage image_;
  double eager_ms_ = 0;
  std::chrono::milliseconds watchdog_{2000};
  json evidence_;
  json worst_;
  std::set<std::string> flags_;
  std::vector<PoolSet> timed_sets_;  // check_seed's sets on the timed dims, for time_candidate
};

}  // namespace

Baselines measure_baselines(const tasks::Task& task, const VerifyOptions& options) {
  Driver::get().require("timing baselines");
  tasks::Reference ref = tasks::Reference::compile(task);
  std::vector<std::vector<torch::Tensor>> pool;
  uint64_t seed = options.seed.value_or(1);
  for (int k = 0; k < options.timing.pool; ++k) {
    std::vector<torch::Tensor> set;
    for (size_t i = 0; i < task.inputs.size(); ++i)
      set.push_back(generate_cuda(task, i, task.dims, seed + 50 + static_cast<uint64_t>(k), 0, options.device));
    pool.push_back(std::move(set));
  }
  TimingGate gate(options.device);
  ClockMonitor clocks = clock_monitor(options.device);
  Baselines b = time_references(task, ref, pool, gate, options.timing, clocks);
  b.clocks = clocks.summary();
  return b;
}

Judge::~Judge() = default;

Judge::Judge(VerifyOptions options) : options_(std::move(options)), runner_([&] {
  RunnerOptions r = options_.runner;
  r.device = options_.device;
  return r;
}()), session_(std::make_unique<Session>()) {
  const Driver& d = Driver::get();
  d.require("verifying a candidate");
  CUdevice dev;
  KFORGE_CU_CHECK(d, d.cuDeviceGet(&dev, options_.device));
  CUcontext ctx;
  KFORGE_CU_CHECK(d, d.cuDevicePrimaryCtxRetain(&ctx, dev));  // LibTorch's context too; kept for the process
  KFORGE_CU_CHECK(d, d.cuCtxSetCurrent(ctx));
  if (!torch::cuda::is_available()) throw CudaError("verifying a candidate needs a LibTorch built with CUDA; this one has none");
}

Verdict Judge::verify(const tasks::Task& task, const compile::CandidateReport& report) {
  return verify_with(options_, task, report);
}

Verdict Judge::verify_with(const VerifyOptions& options, const tasks::Task& task, const compile::CandidateReport& report) {
  if (!report.ok()) return verdict_from_report(report);
  return guarded([&] { return Verification(options, runner_, *session_, task, report).run(); });
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

Verdict Judge::admit(const tasks::Task& unseen, const compile::CandidateReport& report) {
  auto t0 = Clock::now();
  Verdict v;
  if (!report.ok()) {
    v = verdict_from_report(report);
  } else {
    runner_.restart();  // a fresh runner: nothing a earlier run left behind can help
    VerifyOptions o = options_;
    o.time = false;
    v = guarded([&] {
      Verification admission(o, runner_, *session_, unseen, report);
      Verdict w = admission.run();
      json record;
      if (w.correct())
        if (std::optional<Verdict> bad = admission.sanitize(record)) w = *bad;
      w.evidence["sanitizers"] = record["sanitizers"];
      if (record.contains("sanitizer_path")) w.evidence["sanitizer_note"] = record["sanitizer_path"];
      return w;
    });
  }
  json dims = json::array();
  for (const tasks::Dims& d : unseen.all_dims()) dims.push_back(d);
  v.evidence["admission"] = {{"dims", dims}, {"admitted", v.correct()}, {"ms", ms_since(t0)}};
  v.summary = "admission on " + std::to_string(dims.size()) + " unseen configuration(s): " + v.summary;
  return v;
}

std::optional<tasks::Task> unseen_task(const tasks::Task& task, uint64_t seed, int configurations,
                                       const std::function<bool(const tasks::Dims&)>& usable) {
  std::vector<tasks::Dims> dims = tasks::draw_unseen_dims(task, seed, configurations, int64_t{256} << 20, usable);
  if (dims.empty()) return std::nullopt;
  tasks::Task unseen = task;
  unseen.dims = dims.front();
  unseen.check_dims.assign(dims.begin() + 1, dims.end());
  return unseen;
}

Verdict admit_candidate(Judge& judge, const tasks::Task& task, const std::string& source, const std::string& plan,
                        const compile::Tunables& tunables, const compile::DeviceFacts& facts, compile::Compiler& compiler,
                        uint64_t seed, int configurations) {
  std::optional<tasks::Task> unseen = unseen_task(task, seed, configurations);
  if (!unseen) {
    Verdict v;
    v.outcome = Outcome::HarnessError;
    v.summary = "admission: the task's constraints leave no dims configuration that was not shown";
    return v;
  }
  tasks::Reference ref = tasks::Reference::compile(*unseen);
  compile::CandidateReport report =
      compile::check_candidate(*unseen, compile::task_tensors(*unseen, ref), source, plan, tunables, facts, compiler);
  Verdict v = judge.admit(*unseen, report);
  if (!report.ok()) v.summary = "admission on unseen dims: " + v.summary;
  return v;
}

Verdict Judge::guarded(const std::function<Verdict()>& judge) {
  try {
    return judge();
  } catch (const CudaError& e) {
    // Out of memory (LibTorch's cache and the shared buffers compete): this candidate only.
    // Anything else means the GPU itself is unusable: nothing more can be judged.
    if (e.code() != CUDA_ERROR_OUT_OF_MEMORY) throw;
    Verdict v;
    v.outcome = Outcome::HarnessError;
    v.summary = std::string("harness error: ") + e.what();
    runner_.restart();
    return v;
  } catch (const std::exception& e) {
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
