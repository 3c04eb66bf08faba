#include "kforge/tasks/check.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <torch/cuda.h>

#include "kforge/common/strings.h"
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

// A declared output shape as written: "[B, N - 2]".
std::string expressions(const OutputSpec& out) {
  std::string s = "[";
  for (size_t i = 0; i < out.shape.size(); ++i) s += (i ? ", " : "") + out.shape[i].text();
  return s + "]";
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
          if (i < task_.outputs.size() && !task_.outputs[i].shape.empty()) {
            std::vector<int64_t> declared;
            for (const Expr& e : task_.outputs[i].shape) declared.push_back(e.eval_int(cr.dims));
            if (declared != s.shape)
              result.problems.push_back("output '" + names[i] + "' has shape " +
                                        format_shape(s.shape) + " at " + where +
                                        " but the task declares " + expressions(task_.outputs[i]) +
                                        " = " + format_shape(declared));
          }
        }
        cr.bytes_moved = task_.min_bytes ? task_.min_bytes->eval_real(cr.dims)
                                         : static_cast<double>(task_.input_bytes(cr.dims));
        if (!task_.min_bytes)
          for (const auto& o : outputs)
            cr.bytes_moved += static_cast<double>(o.numel() * o.element_size());
        if (!batch_checked_ && !task_.batch_dim.empty() && cr.dims.at(task_.batch_dim) >= 2) {
          batch_checked_ = true;
          check_batch_independence(inputs, outputs, where, result);
        }
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

  // What makes the task degenerate at one configuration ("output 'out' is near-constant"), each
  // without where; `inputs_to_redraw` (all when null) limits the unused-input probe.
  // `progress` (when given) is said before each run (the reference child's clock is per step).
  std::vector<std::string> degenerate_findings(const Dims& dims,
                                               const std::vector<torch::Tensor>& outputs,
                                               const std::vector<OutputStats>& stats,
                                               const std::vector<std::string>& names,
                                               const std::vector<size_t>* inputs_to_redraw,
                                               const std::string* progress = nullptr) {
    auto step = [&] {
      if (progress && opt_.on_config) opt_.on_config(*progress);
    };
    std::vector<std::string> found;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const OutputStats& s = stats[i];
      if (s.nan || s.inf) continue;
      if (outputs[i].numel() > 1) {
        if (s.min == 0 && s.max == 0)
          found.push_back("output '" + names[i] + "' is all zero");
        else if (relative_spread(outputs[i]) < kDegenerateSpread)
          found.push_back("output '" + names[i] + "' is near-constant");
      } else {
        // A scalar output must change with the seed.
        std::vector<torch::Tensor> values{outputs[i].reshape({1})};
        for (uint64_t extra : {opt_.seed + 1000, opt_.seed + 2000}) {
          step();
          values.push_back(reference_.run(make_inputs(dims, extra, -1, 0))[i].reshape({1}));
        }
        if (relative_spread(torch::cat(values)) < kDegenerateSpread)
          found.push_back("scalar output '" + names[i] + "' is the same for 3 seeds");
      }
    }
    std::vector<size_t> all;
    for (size_t k = 0; k < task_.inputs.size(); ++k) all.push_back(k);
    for (size_t k : inputs_to_redraw ? *inputs_to_redraw : all) {
      step();
      std::vector<torch::Tensor> changed =
          reference_.run(make_inputs(dims, opt_.seed, static_cast<int>(k), opt_.seed + 7919));
      if (max_relative_change(outputs, changed) < kUnusedInputChange)
        found.push_back("the output does not depend on input '" + task_.inputs[k].name +
                        "' (re-drawing it changes the output by less than 1e-6 relative)");
    }
    return found;
  }

  // Degeneracy at the largest configuration checked. Found at check dims only, it is checked
  // again at the timed dims where they are affordable (opt_.recheck_timed_bytes): what holds
  // only at the small check sizes is a note, not a problem (docs/task-format.md).
  void check_degenerate(const ConfigResult& cr, const std::vector<torch::Tensor>& outputs,
                        const std::vector<std::string>& names, const std::string& where,
                        TaskCheck& result) {
    auto started = std::chrono::steady_clock::now();
    std::vector<std::string> found =
        degenerate_findings(cr.dims, outputs, cr.outputs, names, nullptr);
    if (found.empty()) return;
    size_t runs = task_.inputs.size();  // what degenerate_findings ran: a run per input...
    for (const auto& o : outputs) runs += o.numel() > 1 ? 0 : 2;  // ...and 2 per scalar output
    double run_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() /
        static_cast<double>(std::max<size_t>(runs, 1));
    if (cr.timed || opt_.dims != DimsSelection::Check || opt_.recheck_timed_bytes <= 0) {
      for (const std::string& f : found)
        result.problems.push_back("degenerate: " + f + " at " + where);
      return;
    }
    std::string timed = "timed dims (" + format_dims(task_.dims) + ")";
    std::string skipped;
    std::vector<std::string> again;
    int64_t bytes = task_.input_bytes(task_.dims);
    // A run at the timed dims, guessed from the run here: work grows faster than the inputs
    // (attention is quadratic in the sequence), so by their ratio to the power 1.5.
    double ratio = static_cast<double>(bytes) /
                   static_cast<double>(std::max<int64_t>(1, task_.input_bytes(cr.dims)));
    double guess = run_s * std::pow(std::max(ratio, 1.0), 1.5);
    if (bytes > opt_.recheck_timed_bytes) {
      skipped =
          "their inputs are " + std::to_string(bytes >> 20) + " MiB; --device cuda checks them";
    } else if (guess > kRecheckSeconds) {
      skipped = "a run there would take about " + std::to_string(static_cast<int64_t>(guess)) +
                " s here; --device cuda checks them";
    } else {
      try {
        std::string label = timed + ", again for degeneracy";
        if (opt_.on_config) opt_.on_config(label);
        std::vector<torch::Tensor> out = reference_.run(make_inputs(task_.dims, opt_.seed, -1, 0));
        std::vector<OutputStats> stats;
        for (size_t i = 0; i < out.size(); ++i) stats.push_back(stats_of(names[i], out[i]));
        std::vector<size_t> unused;  // only the inputs found unused at check dims are redrawn
        for (size_t k = 0; k < task_.inputs.size(); ++k)
          for (const std::string& f : found)
            if (f.find("input '" + task_.inputs[k].name + "'") != std::string::npos)
              unused.push_back(k);
        again = degenerate_findings(task_.dims, out, stats, names, &unused, &label);
      } catch (const std::exception& e) {
        skipped = std::string("it failed there: ") + e.what();
      }
    }
    for (const std::string& f : found) {
      if (!skipped.empty())
        result.problems.push_back("degenerate: " + f + " at " + where +
                                  " (not checked again at the timed dims: " + skipped + ")");
      else if (std::find(again.begin(), again.end(), f) != again.end())
        result.problems.push_back("degenerate: " + f + " at " + where + " and at the " + timed);
      else
        result.notes.push_back("not degenerate at the " + timed + ", so not reported: " + f +
                               " at " + where + " only");
    }
  }

  // The batch_dim's promise (docs/task-format.md), which lets the judge compute a reference a
  // slice at a time: the first batch index alone gives what it gives among the others.
  void check_batch_independence(const std::vector<torch::Tensor>& inputs,
                                const std::vector<torch::Tensor>& outputs, const std::string& where,
                                TaskCheck& result) {
    std::vector<torch::Tensor> first, alone_in;
    for (const torch::Tensor& t : inputs) alone_in.push_back(t.narrow(0, 0, 1));
    std::vector<torch::Tensor> alone = reference_.run(alone_in);
    const std::string dim = "batch_dim '" + task_.batch_dim + "'";
    for (const torch::Tensor& o : outputs) {
      if (o.dim() == 0 || o.size(0) != inputs[0].size(0)) {
        result.problems.push_back(dim + ": an output has shape " + c10::str(o.sizes()) + " at " +
                                  where + ", which does not begin with the batch_dim");
        return;
      }
      first.push_back(o.narrow(0, 0, 1));
    }
    if (double change = max_relative_change(first, alone); change > kBatchSliceChange)
      result.problems.push_back(
          dim + ": the reference on batch index 0 alone differs from the same index computed " +
          "with the others by " + std::to_string(change) + " relative at " + where +
          "; a reference computed a slice at a time must not mix batch indices");
  }

  const Task& task_;
  const CheckOptions& opt_;
  Reference reference_;
  bool upcast_ = false;
  bool batch_checked_ = false;
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
