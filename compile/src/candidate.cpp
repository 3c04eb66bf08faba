#include "kforge/compile/candidate.h"

#include <functional>
#include <regex>

#include "kforge/common/hash.h"
#include "kforge/compile/signature.h"

namespace kforge::compile {
namespace {

std::string base_name(const std::string& kernel) { return kernel.substr(0, kernel.find('<')); }

// Whether `name` is defined as a __global__ function (or template) in the source.
bool defines_kernel(const std::string& source, const std::string& name) {
  std::regex re(R"(__global__[^;{}]*\b)" + name + R"(\s*\()");
  return std::regex_search(source, re);
}

}  // namespace

std::string_view stage_name(Stage s) {
  switch (s) {
    case Stage::Answer: return "answer";
    case Stage::Plan: return "plan";
    case Stage::Compile: return "compile";
    case Stage::Signature: return "signature";
    case Stage::Limits: return "limits";
    case Stage::Passed: return "passed";
  }
  return "?";
}

std::vector<TensorInfo> task_tensors(const tasks::Task& task, const tasks::Reference& ref) {
  std::vector<TensorInfo> out;
  for (const auto& in : task.inputs) out.push_back({in.name, in.dtype, TensorRole::Input});
  for (const auto& o : tasks::describe_outputs(task, ref)) out.push_back({o.name, o.dtype, TensorRole::Output});
  return out;
}

std::string relabel_log(const std::string& log, const std::string& file, int first_line) {
  static const std::regex re(R"(candidate\.cu\((\d+)\))");
  std::string out;
  auto last = log.cbegin();
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator(); ++it) {
    out.append(last, (*it)[0].first);
    out += file + ":" + std::to_string(std::stoi((*it)[1]) + first_line - 1);
    last = (*it)[0].second;
  }
  out.append(last, log.cend());
  return out;
}

CandidateReport check_candidate(const tasks::Task& task, const std::vector<TensorInfo>& tensors, const std::string& source,
                                const std::string& plan_text, const std::optional<Tunables>& tunables,
                                const DeviceFacts& facts, Compiler& compiler) {
  CandidateReport r;
  r.stage = Stage::Plan;
  Plan plan;
  try {
    plan = parse_plan_text(plan_text, task, tensors);
    if (tunables) {
      validate_tunables(plan, *tunables);
      r.tunables = *tunables;
      if (!constraints_hold(plan, task.dims, r.tunables, facts))
        throw PlanError("constraints: the chosen tunables break a constraint at the timed dims");
    } else {
      std::vector<Tunables> space = tune_space(plan, task.dims, facts);
      if (space.empty()) throw PlanError("constraints: no combination of the tunables' values satisfies the constraints at the timed dims");
      r.tunables = space.front();
    }
  } catch (const PlanError& e) {
    r.errors.push_back(e.what());
    return r;
  }
  r.identity = candidate_identity(source, plan.json, r.tunables);
  for (size_t i = 0; i < plan.launches.size(); ++i)
    if (!defines_kernel(source, base_name(plan.launches[i].kernel)))
      r.errors.push_back("launch[" + std::to_string(i) + "].kernel: the source defines no __global__ function named '" +
                         base_name(plan.launches[i].kernel) + "'");
  if (!r.errors.empty()) return r;

  r.stage = Stage::Compile;
  ModuleRequest req;
  req.source = source;
  req.arch = facts.arch;
  req.defines = r.tunables;
  for (const auto& l : plan.launches)
    if (std::find(req.name_expressions.begin(), req.name_expressions.end(), l.kernel) == req.name_expressions.end())
      req.name_expressions.push_back(l.kernel);
  r.module = compiler.compile(req);
  if (!r.module.ok) {
    if (!r.module.rejections.empty()) r.errors = r.module.rejections;
    else r.errors.push_back("the source does not compile:\n" + r.module.log);
    return r;
  }

  r.stage = Stage::Signature;
  std::map<std::string, std::vector<ParamType>> params;  // by plan kernel name
  std::map<std::string, bool> from_ptx;
  for (size_t k = 0; k < req.name_expressions.size(); ++k) {
    const std::string& name = req.name_expressions[k];
    KernelReport kr;
    kr.name = name;
    kr.lowered = r.module.lowered_names.at(k);
    kr.signature = demangle(kr.lowered);
    if (auto it = r.module.resources.find(kr.lowered); it != r.module.resources.end()) kr.resources = it->second;
    r.kernels.push_back(kr);
    std::optional<std::vector<ParamType>> p =
        kr.signature.empty() ? ptx_parameters(r.module.ptx, kr.lowered) : parse_demangled_parameters(kr.signature);
    if (!p) {
      r.errors.push_back("kernel " + name + ": kforge could not read its parameter list (" +
                         (kr.signature.empty() ? kr.lowered : kr.signature) + ")");
      continue;
    }
    params[name] = *p;
    r.kernels.back().params = *p;
    from_ptx[name] = kr.signature.empty();
  }
  if (!r.errors.empty()) return r;

  // Limits and argument types on every configuration: the timed dims and each check dims.
  r.stage = Stage::Limits;
  for (const tasks::Dims& d : task.all_dims()) {
    ConcretePlan cp;
    try {
      cp = evaluate_plan(plan, d, r.tunables, facts);
    } catch (const PlanError& e) {
      r.errors.push_back(e.what());
      continue;
    }
    for (size_t i = 0; i < cp.launches.size(); ++i) {
      const ConcreteLaunch& l = cp.launches[i];
      const KernelReport* kr = nullptr;
      for (const auto& k : r.kernels)
        if (k.name == l.kernel) kr = &k;
      for (std::string& p : check_arguments(l, i, plan, params[l.kernel], from_ptx[l.kernel])) {
        p += " (at dims " + tasks::format_dims(d) + ")";
        if (std::find(r.errors.begin(), r.errors.end(), p) == r.errors.end()) r.errors.push_back(p);
      }
      if (kr && kr->resources.static_shared_bytes + l.shared_bytes > facts.max_shared_per_block)
        r.errors.push_back("launch[" + std::to_string(i) + "]: " + std::to_string(kr->resources.static_shared_bytes) +
                           " bytes of static plus " + std::to_string(l.shared_bytes) + " bytes of dynamic shared memory exceed " +
                           std::to_string(facts.max_shared_per_block) + " per block (at dims " + tasks::format_dims(d) + ")");
      if (kr && kr->resources.registers * l.block[0] * l.block[1] * l.block[2] > 65536)
        r.errors.push_back("launch[" + std::to_string(i) + "]: " + std::to_string(kr->resources.registers) + " registers x " +
                           std::to_string(l.block[0] * l.block[1] * l.block[2]) +
                           " threads exceed the 65536 registers of an SM (add __launch_bounds__ or use smaller blocks)");
    }
    r.configurations.emplace_back(d, std::move(cp));
  }
  // The same message for every configuration is one problem.
  std::sort(r.errors.begin(), r.errors.end());
  r.errors.erase(std::unique(r.errors.begin(), r.errors.end()), r.errors.end());
  if (r.errors.empty()) r.stage = Stage::Passed;
  return r;
}

}  // namespace kforge::compile
