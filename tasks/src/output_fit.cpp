#include "kforge/tasks/output_fit.h"

#include <cstdlib>
#include <functional>

#include "kforge/common/error.h"

namespace kforge::tasks {

std::vector<std::vector<Expr>> infer_output_shapes(
    const Task& task, const std::vector<std::vector<std::vector<int64_t>>>& sizes_per_config,
    const std::vector<Dims>& configs) {
  std::vector<Expr> candidates;
  for (const InputSpec& in : task.inputs)
    for (const Expr& e : in.shape) candidates.push_back(e);
  for (const auto& [d, v] : task.dims) candidates.push_back(Expr::parse(d));
  // Convolutions and pools: an input size less a kernel's reach, divided by a stride.
  size_t plain = candidates.size();
  for (size_t i = 0; i < plain; ++i)
    for (int div = 1; div <= 4; ++div)
      for (int add = -8; add <= 8; ++add) {
        if (div == 1 && add == 0) continue;
        std::string e = add ? "(" + candidates[i].text() + ")" + (add > 0 ? " + " : " - ") +
                                  std::to_string(std::abs(add))
                            : candidates[i].text();
        candidates.push_back(Expr::parse(div == 1 ? e : "(" + e + ") / " + std::to_string(div)));
      }
  std::vector<std::vector<Expr>> out;
  size_t outputs = sizes_per_config.at(0).size();
  for (size_t k = 0; k < outputs; ++k) {
    std::vector<Expr> shape;
    for (size_t a = 0; a < sizes_per_config[0][k].size(); ++a) {
      auto fits = [&](const std::function<int64_t(size_t)>& value) {
        for (size_t c = 0; c < configs.size(); ++c)
          if (sizes_per_config[c].size() != outputs || sizes_per_config[c][k].size() <= a ||
              sizes_per_config[c][k][a] != value(c))
            return false;
        return true;
      };
      std::optional<Expr> found;
      for (const Expr& e : candidates)
        if (!found && fits([&](size_t c) { return e.eval_int(configs[c]); })) found = e;
      if (!found && fits([&](size_t) { return sizes_per_config[0][k][a]; }))
        found = Expr::constant(sizes_per_config[0][k][a]);
      if (!found)
        throw Error("output " + std::to_string(k) + " axis " + std::to_string(a) +
                    " is neither an input's size, a dim nor a constant across the configurations");
      shape.push_back(*found);
    }
    out.push_back(shape);
  }
  return out;
}

std::vector<std::vector<Expr>> fit_output_shapes(const Task& task, const Reference& ref) {
  std::vector<Dims> configs = task.check_dims, known;
  configs.push_back(task.dims);
  std::vector<std::vector<std::vector<int64_t>>> sizes;
  for (const Dims& d : configs) {
    std::vector<std::vector<int64_t>> per;
    if (std::optional<std::vector<TensorShape>> shapes = output_shapes(task, ref, d)) {
      for (const TensorShape& s : *shapes) per.push_back(s.sizes);
    } else if (task.input_bytes(d) <= (int64_t{64} << 20)) {
      std::vector<torch::Tensor> inputs;
      for (const InputSpec& in : task.inputs)
        inputs.push_back(torch::zeros(task.shape_of(in, d),
                                      torch::TensorOptions().dtype(to_scalar_type(in.dtype))));
      try {
        for (const torch::Tensor& t : ref.run(inputs)) per.push_back(t.sizes().vec());
      } catch (const std::exception&) {
        continue;  // float16 on the CPU, say: this configuration tells nothing
      }
    } else {
      continue;
    }
    sizes.push_back(per);
    known.push_back(d);
  }
  if (known.size() < 2)
    throw Error("the reference's output shapes are known at " + std::to_string(known.size()) +
                " configuration(s) only (the meta device lacks an op, the others are too large to "
                "run on the CPU)");
  return infer_output_shapes(task, sizes, known);
}

}  // namespace kforge::tasks
