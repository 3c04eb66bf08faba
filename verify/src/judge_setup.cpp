// The judge's set-up (judge_parts.h): one verification's seed and module, inputs and references,
// a configuration's buffers and launches, and one run's preparation and check.
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <algorithm>
#include <random>

#include "judge_parts.h"
#include "kforge/tasks/math_mode.h"
#include "kforge/verify/batch_slices.h"
#include "kforge/verify/device_facts.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/gpu_generator.h"
#include "kforge/verify/memory.h"
#include "kforge/verify/protocol.h"

namespace kforge::verify {

using nlohmann::json;

std::chrono::milliseconds default_watchdog(double eager_ms, size_t launches) {
  double ms = 50.0 * eager_ms * static_cast<double>(std::max<size_t>(launches, 1));
  return std::chrono::milliseconds(static_cast<int64_t>(std::clamp(ms, 2000.0, 60000.0)));
}

namespace parts {

void synchronize() {
  const Driver& d = Driver::get();
  KFORGE_CU_CHECK(d, d.cuCtxSynchronize());
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

void note_phase(json& evidence, const char* name, Clock::time_point& since) {
  evidence["phase_ms"][name] = ms_since(since);
  since = Clock::now();
}

void note_step(json& evidence, const char* name, Clock::time_point& since) {
  synchronize();
  json& slot = evidence["correctness_split_ms"][name];
  slot = (slot.is_null() ? 0.0 : slot.get<double>()) + ms_since(since);
  since = Clock::now();
}

std::vector<torch::Tensor> run_reference(const tasks::Task& task, const tasks::Reference& ref,
                                         const std::vector<torch::Tensor>& inputs, bool scripted) {
  tasks::MathModeGuard mode(task.allow_tf32);
  torch::jit::GraphOptimizerEnabledGuard optimizer(scripted);
  return ref.run(inputs);
}

Verification::Verification(const VerifyOptions& options, RunnerClient& runner,
                           Judge::Session& session, const tasks::Task& task,
                           const compile::CandidateReport& report)
    : options(options),
      runner(runner),
      session(session),
      task(task),
      report(report),
      reference(session.reference(task)) {
  static std::random_device rd;
  seed = options.seed ? *options.seed : 1 + rd() % 1000000000u;
  image.cubin = report.module.cubin;
  for (const auto& k : report.kernels) image.kernels.push_back(k.lowered);
  image.globals = ptx_global_variables(report.module.ptx);
  evidence = {
      {"seed", seed}, {"harness_version", kHarnessVersion}, {"globals_reset", image.globals}};
}

std::vector<torch::Tensor> draw_inputs(const Verification& j, const tasks::Dims& dims,
                                       uint64_t seed, int variant) {
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < j.task.inputs.size(); ++i)
    out.push_back(generate_cuda(j.task, i, dims, seed, variant, j.options.device));
  return out;
}

std::vector<torch::Tensor> eager(const Verification& j, const std::vector<torch::Tensor>& inputs,
                                 bool scripted) {
  return run_reference(j.task, j.reference, inputs, scripted);
}

std::vector<torch::Tensor> reference64(Verification& j, const std::vector<torch::Tensor>& inputs) {
  std::vector<torch::Tensor> wide;
  for (const torch::Tensor& t : inputs)
    wide.push_back(t.is_floating_point() ? t.to(torch::kFloat64) : t);
  // Inputs of the batch a slice already fitted start at that slice, not with a whole try.
  const int64_t n = batch_length(inputs);
  const int64_t known = j.reference64_slice.first == n ? j.reference64_slice.second : 0;
  SlicedResult r = run_in_batch_slices(
      j.task, [&](const std::vector<torch::Tensor>& in) { return eager(j, in); }, wide,
      [&] {
        synchronize();
        release_torch_cache(j.options.device);
      },
      known);
  if (r.slice > 0) {
    j.reference64_slice = {n, r.slice};
    j.evidence["reference64_slice"] = r.slice;
  }
  return std::move(r.outputs);
}

double tolerance_for(const tasks::Task& task, size_t o, tasks::Dtype dt) {
  if (o < task.outputs.size() && task.outputs[o].tolerance) return *task.outputs[o].tolerance;
  return default_tolerance(dt);
}

double time_eager(const Verification& j) {
  std::vector<torch::Tensor> in = draw_inputs(j, j.task.dims, j.seed + 99, 0);
  eager(j, in);
  synchronize();
  auto t0 = Clock::now();
  eager(j, in);
  synchronize();
  return ms_since(t0);
}

namespace {

TensorSize size_of(const std::vector<int64_t>& shape, torch::ScalarType type) {
  TensorSize t;
  t.numel = 1;
  for (int64_t s : shape) t.numel *= static_cast<uint64_t>(std::max<int64_t>(s, 0));
  t.element_bytes = c10::elementSize(type);
  t.floating = c10::isFloatingType(type) || c10::isComplexType(type);
  return t;
}

}  // namespace

PoolPlan plan_memory(const Verification& j, const tasks::Dims& dims,
                     const std::vector<std::vector<int64_t>>& out_shapes,
                     const std::vector<torch::ScalarType>& out_types,
                     const compile::ConcretePlan& plan) {
  const tasks::Task& task = j.task;
  const int device = j.options.device;
  std::vector<TensorSize> in, out, ws;
  for (const tasks::InputSpec& i : task.inputs)
    in.push_back(size_of(task.shape_of(i, dims), tasks::to_scalar_type(i.dtype)));
  for (size_t o = 0; o < out_shapes.size(); ++o)
    out.push_back(size_of(out_shapes[o], out_types[o]));
  for (const compile::ConcreteWorkspace& w : plan.workspaces)
    ws.push_back(size_of({w.count}, tasks::to_scalar_type(w.dtype)));
  const bool timing = j.options.time;
  // The roofline's device facts are measured once per GPU (8 GiB of temporaries): before the
  // buffers and the pool exist, not beside them.
  if (timing) (void)device_facts(device);
  DeviceMemory m = device_memory(device);
  MemoryNeeds needs = memory_needs(in, out, ws, allocation_granularity(device), m.total);
  const int wanted = timing ? std::max(j.options.timing.pool, 1) : 1;
  const int minimum = timing ? std::min(wanted, kMinPoolSets) : 1;
  const std::optional<uint64_t> limit = memory_limit(j.options.memory_limit);
  auto make = [&](bool released) {
    PoolPlan p =
        plan_pool(needs, limit ? std::min<uint64_t>(m.free, *limit) : m.free, wanted, minimum);
    p.device = m;
    p.limit = limit;
    p.released_torch_cache = released;
    return p;
  };
  PoolPlan p = make(false);
  // LibTorch keeps what earlier verifications freed: given back only when the plan needs it.
  if (p.sets < wanted && (!limit || m.free < *limit)) {
    synchronize();
    const bool released = release_torch_cache(device);
    m = device_memory(device);
    p = make(released);
  }
  if (!p.fits) throw MemoryShortfall(p);
  return p;
}

Config prepare_config(const Verification& j, const tasks::Dims& dims,
                      const compile::ConcretePlan& plan, size_t index, bool size_pool) {
  const tasks::Task& task = j.task;
  const int device = j.options.device;
  Config c;
  c.dims = dims;
  c.timed = dims == task.dims;
  // The reference's outputs on inputs no candidate run sees give the output shapes.
  std::vector<std::vector<int64_t>> out_shapes;
  std::vector<torch::ScalarType> out_types;
  {
    std::vector<torch::Tensor> probe = eager(j, draw_inputs(j, dims, j.seed + 100 * index + 99, 0));
    for (const torch::Tensor& t : probe) {
      out_shapes.push_back(t.sizes().vec());
      out_types.push_back(t.scalar_type());
    }
  }  // gone before the memory is measured
  if (size_pool)
    c.memory = plan_memory(j, dims, out_shapes, out_types, plan);  // throws MemoryShortfall
  std::vector<std::string> out_names = tasks::output_names(task, out_shapes.size());
  for (size_t i = 0; i < task.inputs.size(); ++i) {
    const tasks::InputSpec& in = task.inputs[i];
    c.buffers.push_back(std::make_unique<SharedBuffer>(
        in.name, task.shape_of(in, dims), tasks::to_scalar_type(in.dtype), true, device));
    c.names.push_back(in.name);
  }
  c.inputs = c.buffers.size();
  for (size_t i = 0; i < out_shapes.size(); ++i) {
    c.buffers.push_back(
        std::make_unique<SharedBuffer>(out_names[i], out_shapes[i], out_types[i], false, device));
    c.names.push_back(out_names[i]);
  }
  c.outputs = out_shapes.size();
  for (const compile::ConcreteWorkspace& w : plan.workspaces) {
    c.buffers.push_back(std::make_unique<SharedBuffer>(
        w.name, std::vector<int64_t>{w.count}, tasks::to_scalar_type(w.dtype), false, device));
    c.names.push_back(w.name);
    if (w.zero_init) c.request.zero_buffers.push_back(static_cast<int>(c.buffers.size() - 1));
  }
  const compile::CandidateReport& report = j.report;
  for (const compile::ConcreteLaunch& l : plan.launches) {
    LaunchSpecWire w;
    w.index = static_cast<int>(l.index);
    for (size_t k = 0; k < report.kernels.size(); ++k)
      if (report.kernels[k].name == l.kernel) w.kernel = static_cast<int>(k);
    const std::vector<compile::ParamType>& params =
        report.kernels.at(static_cast<size_t>(w.kernel)).params;
    w.grid = l.grid, w.block = l.block, w.cluster = l.cluster;
    w.shared_bytes = l.shared_bytes;
    w.cooperative = l.cooperative;
    for (size_t a = 0; a < l.args.size(); ++a) {
      LaunchArg arg;
      if (l.args[a].is_tensor) {
        arg.buffer = static_cast<int>(std::find(c.names.begin(), c.names.end(), l.args[a].tensor) -
                                      c.names.begin());
        if (l.args[a].map.rank > 0) {  // the map stays inside the tensor (compile checked the rest)
          std::string why = kforge_launch::check_tensor_map(
              l.args[a].map, static_cast<int64_t>(c.buffers.at(arg.buffer)->spec().bytes));
          if (!why.empty())
            throw compile::PlanError(
                "launch[" + std::to_string(l.index) + "].args[" + std::to_string(a) + "]." +
                kforge_launch::place(why, " for dims (" + tasks::format_dims(dims) + ")"));
          arg.map = l.args[a].map;
        }
      } else {
        arg.value = l.args[a].value;
        arg.bytes = kforge_launch::int_arg_bytes(a < params.size() ? params[a].bits : 64);
      }
      w.args.push_back(arg);
    }
    c.request.launches.push_back(std::move(w));
  }
  return c;
}

std::vector<BufferSpec> specs(const Config& c, bool inputs_read_only) {
  std::vector<BufferSpec> out;
  for (const auto& b : c.buffers) {
    BufferSpec s = b->spec();
    s.read_only = s.read_only && inputs_read_only;
    out.push_back(s);
  }
  return out;
}

std::vector<int> fds(const Config& c) {
  std::vector<int> out;
  for (const auto& b : c.buffers) out.push_back(b->fd());
  return out;
}

std::vector<torch::Tensor> prepare_run(Config& c, const std::vector<torch::Tensor>& inputs,
                                       Poison kind, uint64_t seed) {
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

std::optional<Verdict> after_run(const json& evidence, Config& c,
                                 const std::vector<torch::Tensor>& inputs, uint64_t seed,
                                 const Place& at) {
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    std::vector<torch::Tensor> slack = c.buffers[i]->slack();
    for (size_t side = 0; side < slack.size(); ++side) {
      CanaryCheck k = check_canary(slack[side], seed * 7 + i);
      if (k.ok()) continue;
      // The first changed byte: before the tensor, the farthest from its start; after it, the
      // nearest to its end.
      int64_t distance =
          side == 0 ? static_cast<int64_t>(slack[0].numel()) - k.first_offset : k.first_offset + 1;
      return fail(evidence, Outcome::OutOfBoundsWrite,
                  std::to_string(k.overwritten) + " byte(s) " + (side == 0 ? "before" : "after") +
                      " '" + c.names[i] + "' overwritten (" + (side == 0 ? "reaching " : "from ") +
                      std::to_string(distance) + " byte(s) " +
                      (side == 0 ? "before its start" : "past its end") + ") " + at.words(),
                  {{"buffer", c.names[i]},
                   {"side", side == 0 ? "before" : "after"},
                   {"bytes_overwritten", k.overwritten},
                   {side == 0 ? "farthest_distance_bytes" : "nearest_distance_bytes", distance}},
                  at);
    }
  }
  for (size_t i = 0; i < c.inputs; ++i) {
    if (bitwise_equal(c.buffers[i]->tensor(), inputs[i])) continue;
    int64_t changed = bitwise_differences(c.buffers[i]->tensor(), inputs[i]);
    return fail(evidence, Outcome::InputModified,
                "input '" + c.names[i] + "' changed in " + std::to_string(changed) +
                    " element(s) " + at.words(),
                {{"input", c.names[i]}, {"elements_changed", changed}}, at);
  }
  return std::nullopt;
}

}  // namespace parts
}  // namespace kforge::verify
