#include "kforge/tasks/check.h"

#include <algorithm>
#include <chrono>

#include <torch/cuda.h>

#include "kforge/tasks/math_mode.h"
#include "kforge/tasks/reference.h"

namespace kforge::tasks {
namespace {

bool is_low_precision(Dtype d) {
  return d == Dtype::Float16 || d == Dtype::BFloat16;
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

OutputStats stats_of(const std::string& name, const torch::Tensor& out) {
  OutputStats s;
  s.name = name;
  s.shape = out.sizes().vec();
  s.dtype = std::string(c10::toString(out.scalar_type()));
  torch::Tensor d = out.detach().to(torch::kFloat64);  // stays on its device: outputs can be GBs
  if (d.numel() == 0) return s;
  torch::Tensor finite = torch::isfinite(d);
  s.nan = torch::isnan(d).sum().item<int64_t>();
  s.inf = torch::isinf(d).sum().item<int64_t>();
  torch::Tensor f = d.masked_select(finite);
  if (f.numel() == 0) return s;
  s.min = f.min().item<double>();
  s.max = f.max().item<double>();
  s.mean = f.mean().item<double>();
  s.rms = std::sqrt((f * f).mean().item<double>());
  return s;
}

double max_relative_change(const std::vector<torch::Tensor>& a,
                           const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    torch::Tensor x = a[i].detach().to(torch::kFloat64);
    torch::Tensor y = b[i].detach().to(torch::kFloat64);
    if (x.sizes() != y.sizes()) return 1.0;
    double scale = std::max(x.abs().max().item<double>(), 1e-30);
    worst = std::max(worst, (x - y).abs().max().item<double>() / scale);
  }
  return worst;
}

class Checker {
 public:
  Checker(const Task& task, const CheckOptions& opt)
      : task_(task), opt_(opt), reference_(Reference::compile(task)) {
    upcast_ = opt.device.is_cpu() &&
              std::any_of(task.inputs.begin(), task.inputs.end(),
                          [](const InputSpec& in) { return is_low_precision(in.dtype); });
  }

  TaskCheck run() {
    MathModeGuard math_mode(task_.allow_tf32);
    TaskCheck result;
    result.task = task_.id();
    if (upcast_)
      result.notes.push_back(
          "float16/bfloat16 inputs run upcast to float32 on the CPU (values drawn in their own "
          "dtype)");
    std::vector<std::pair<Dims, bool>> configs;
    if (opt_.dims != DimsSelection::Check) configs.emplace_back(task_.dims, true);
    if (opt_.dims != DimsSelection::Timed)
      for (const Dims& d : task_.check_dims) configs.emplace_back(d, false);
    if (configs.empty()) configs.emplace_back(task_.dims, true);  // no [check]: fall back to timed

    // Degeneracy is judged on the largest configuration: tiny ones (N = 1) are legitimately
    // constant.
    size_t largest = 0;
    for (size_t i = 1; i < configs.size(); ++i)
      if (task_.input_bytes(configs[i].first) > task_.input_bytes(configs[largest].first))
        largest = i;

    for (size_t c = 0; c < configs.size(); ++c) {
      ConfigResult cr;
      cr.dims = configs[c].first;
      cr.timed = configs[c].second;
      std::string where = (cr.timed ? "timed dims (" : "check dims (") + format_dims(cr.dims) + ")";
      if (opt_.on_config) opt_.on_config(where);
      try {
        std::vector<torch::Tensor> inputs = make_inputs(cr.dims, opt_.seed, -1, 0);
        std::vector<torch::Tensor> outputs = reference_.run(inputs);
        std::vector<std::string> names = output_names(task_, outputs.size());
        for (size_t i = 0; i < outputs.size(); ++i) {
          cr.outputs.push_back(stats_of(names[i], outputs[i]));
          const OutputStats& s = cr.outputs.back();
          if (s.nan || s.inf)
            result.problems.push_back("output '" + names[i] + "' has " + std::to_string(s.nan) +
                                      " NaN and " + std::to_string(s.inf) + " Inf values at " +
                                      where);
          if (!task_.outputs.empty() && task_.outputs[i].dtype &&
              from_scalar_type(outputs[i].scalar_type()) != task_.outputs[i].dtype && !upcast_)
            result.problems.push_back("output '" + names[i] + "' is " + s.dtype +
                                      " but the task declares " +
                                      std::string(dtype_name(*task_.outputs[i].dtype)));
        }
        cr.bytes_moved = task_.min_bytes ? task_.min_bytes->eval_real(cr.dims)
                                         : static_cast<double>(task_.input_bytes(cr.dims));
        if (!task_.min_bytes)
          for (const auto& o : outputs)
            cr.bytes_moved += static_cast<double>(o.numel() * o.element_size());
        if (opt_.timing_runs > 0) cr.reference_ms = time_reference(inputs);
        if (c == largest) check_degenerate(cr, outputs, names, where, result);
      } catch (const Error& e) {
        cr.error = e.what();
        result.problems.push_back("at " + where + ": " + e.what());
      } catch (const std::exception& e) {
        cr.error = e.what();
        result.problems.push_back("at " + where + ": " + e.what());
      }
      result.configs.push_back(std::move(cr));
    }
    return result;
  }

 private:
  // Inputs for one configuration; input `redraw` (if >= 0) uses `redraw_seed` instead.
  std::vector<torch::Tensor> make_inputs(const Dims& d, uint64_t seed, int redraw,
                                         uint64_t redraw_seed) {
    std::vector<torch::Tensor> inputs;
    for (size_t k = 0; k < task_.inputs.size(); ++k) {
      uint64_t s = static_cast<int>(k) == redraw ? redraw_seed : seed;
      torch::Tensor t = opt_.generator ? opt_.generator(task_, k, d, s, 0)
                                       : generate_cpu(task_, k, d, s, 0).to(opt_.device);
      if (upcast_ && is_low_precision(task_.inputs[k].dtype)) t = t.to(torch::kFloat32);
      inputs.push_back(std::move(t));
    }
    return inputs;
  }

  double time_reference(const std::vector<torch::Tensor>& inputs) {
    (void)reference_.run(inputs);  // warm-up
    synchronize(opt_.device);
    std::vector<double> ms;
    for (int i = 0; i < opt_.timing_runs; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      (void)reference_.run(inputs);
      synchronize(opt_.device);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

  void check_degenerate(const ConfigResult& cr, const std::vector<torch::Tensor>& outputs,
                        const std::vector<std::string>& names, const std::string& where,
                        TaskCheck& result) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      const OutputStats& s = cr.outputs[i];
      if (s.nan || s.inf) continue;
      if (outputs[i].numel() > 1) {
        if (s.min == 0 && s.max == 0)
          result.problems.push_back("degenerate: output '" + names[i] + "' is all zero at " +
                                    where);
        else if (relative_spread(outputs[i]) < kDegenerateSpread)
          result.problems.push_back("degenerate: output '" + names[i] + "' is near-constant at " +
                                    where);
      } else {
        // A scalar output must change with the seed.
        std::vector<torch::Tensor> values{outputs[i].reshape({1})};
        for (uint64_t extra : {opt_.seed + 1000, opt_.seed + 2000})
          values.push_back(reference_.run(make_inputs(cr.dims, extra, -1, 0))[i].reshape({1}));
        if (relative_spread(torch::cat(values)) < kDegenerateSpread)
          result.problems.push_back("degenerate: scalar output '" + names[i] +
                                    "' is the same for 3 seeds at " + where);
      }
    }
    for (size_t k = 0; k < task_.inputs.size(); ++k) {
      std::vector<torch::Tensor> changed =
          reference_.run(make_inputs(cr.dims, opt_.seed, static_cast<int>(k), opt_.seed + 7919));
      if (max_relative_change(outputs, changed) < kUnusedInputChange)
        result.problems.push_back(
            "degenerate: the output does not depend on input '" + task_.inputs[k].name +
            "' (re-drawing it changes the output by less than 1e-6 relative) at " + where);
    }
  }

  const Task& task_;
  const CheckOptions& opt_;
  Reference reference_;
  bool upcast_ = false;
};

}  // namespace

double relative_spread(const torch::Tensor& t) {
  torch::Tensor d = t.detach().to(torch::kFloat64);
  if (d.numel() == 0) return 0;
  double lo = d.min().item<double>(), hi = d.max().item<double>();
  double scale = std::max(std::fabs(lo), std::fabs(hi));
  return scale == 0 ? 0 : (hi - lo) / scale;
}

TaskCheck check_task(const Task& task, const CheckOptions& options) {
  return Checker(task, options).run();
}

}  // namespace kforge::tasks
