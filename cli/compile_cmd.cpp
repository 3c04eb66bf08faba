// `kforge compile`: a candidate (source + plan, or a whole LLM answer) checked and compiled
// without a GPU: plan, NVRTC, signatures, limits on every dims configuration, resource report.
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "candidate_input.h"
#include "command_list.h"
#include "commands.h"
#include "kforge/common/files.h"
#include "kforge/common/strings.h"
#include "kforge/compile/candidate.h"
#include "kforge/compile/nvrtc.h"
#include "kforge/tasks/reference_child.h"
#include "kforge/tasks/task.h"
#include "kforge/verify/driver.h"
#include "table.h"

namespace kforge::cli {
namespace {

using nlohmann::ordered_json;

struct CompileArgs {
  std::string source_file, plan_file, answer_file, task, arch, tasks_dir, emit_dir;
  KernelBenchFlags kernelbench;
  std::vector<std::string> tune;
  bool json = false, no_cache = false, in_process = false;
  double time_limit_s = 60;
  std::optional<std::string> reference_time_limit;
};

std::string dim3(const std::array<int64_t, 3>& v) {
  return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ", " + std::to_string(v[2]) +
         ")";
}

int run_compile(const CompileArgs& a) {
  tasks::ReferenceLimits limits =
      tasks::reference_limits(a.reference_time_limit, tasks::kShapesReferenceSeconds);
  tasks::ReferenceChild reference(limits);
  CandidateFiles files{a.source_file, a.plan_file, a.answer_file};
  std::optional<tasks::Task> kernelbench_task;
  CandidateInput in;
  if (!a.kernelbench.file.empty()) {
    kernelbench_task = kernelbench_task_of(a.task, a.tasks_dir);
    in = read_kernelbench_candidate(a.kernelbench, files, *kernelbench_task, reference,
                                    a.json ? std::cerr : std::cout);
  } else {
    check_kernelbench_flags(a.kernelbench);
    in = read_candidate(files, "kforge compile");
  }
  if (in.answer_error) {
    if (a.json)
      std::cout << ordered_json(
                       {{"ok", false}, {"stage", "answer"}, {"errors", {*in.answer_error}}})
                       .dump(2)
                << "\n";
    else
      std::cout << "rejected at the answer stage:\n  " << printable(*in.answer_error) << "\n";
    return kExitFindings;
  }
  const std::string& source = in.source;
  const std::string& plan = in.plan;
  const std::string& source_label = in.label;
  int source_first_line = in.first_line;
  tasks::Task task =
      kernelbench_task ? *kernelbench_task : load_candidate_task(a.task, in, a.tasks_dir);
  std::vector<compile::TensorInfo> tensors = compile::task_tensors(task, reference.outputs(task));
  compile::DeviceFacts facts = facts_for(a.arch);

  compile::CompilerOptions copt;
  copt.use_cache = !a.no_cache;
  copt.in_process = a.in_process;
  copt.time_limit = std::chrono::milliseconds(static_cast<int64_t>(a.time_limit_s * 1000));
  compile::Compiler compiler(copt);
  std::optional<compile::Tunables> tunables;
  if (!a.tune.empty()) {
    tunables = parse_tune(a.tune);
    check_tune(plan, task, tensors, *tunables);
  }
  compile::CandidateReport r =
      compile::check_candidate(task, tensors, source, plan, tunables, facts, compiler);
  compile::CompilerStats stats = compiler.stats();
  if (!a.emit_dir.empty() && r.module.ok) {
    make_directories(a.emit_dir);
    write_file_atomic(a.emit_dir + "/candidate.ptx", r.module.ptx);
    write_file_atomic(a.emit_dir + "/candidate.cubin", r.module.cubin);
    write_file_atomic(a.emit_dir + "/candidate.cu",
                      compile::source_with_tunables(source, r.tunables));
  }
  compile::NvrtcVersion nv = compile::nvrtc_version();
  std::string log = compile::relabel_log(r.module.log, source_label, source_first_line);
  for (auto& e : r.errors) e = compile::relabel_log(e, source_label, source_first_line);

  if (a.json) {
    ordered_json j;
    j["ok"] = r.ok();
    j["stage"] = compile::stage_name(r.stage);
    j["errors"] = r.errors;
    j["task"] = task.id();
    j["identity"] = r.identity;
    j["tunables"] = r.tunables;
    j["arch"] = facts.arch;
    j["device_facts"] = {{"num_sms", facts.num_sms},
                         {"max_shared_per_block", facts.max_shared_per_block},
                         {"measured", facts.measured}};
    j["nvrtc"] = std::to_string(nv.major) + "." + std::to_string(nv.minor);
    j["compile_ms"] = r.module.compile_ms;
    j["cache"] = {{"hit", r.module.cache_hit}, {"hits", stats.hits}, {"misses", stats.misses}};
    j["kernels"] = ordered_json::array();
    for (const auto& k : r.kernels)
      j["kernels"].push_back({{"name", k.name},
                              {"lowered", k.lowered},
                              {"signature", k.signature},
                              {"registers", k.resources.registers},
                              {"static_shared_bytes", k.resources.static_shared_bytes},
                              {"stack_bytes", k.resources.stack_bytes},
                              {"spill_store_bytes", k.resources.spill_store_bytes},
                              {"spill_load_bytes", k.resources.spill_load_bytes},
                              {"barriers", k.resources.barriers}});
    j["configurations"] = ordered_json::array();
    for (const auto& [dims, cp] : r.configurations) {
      ordered_json c = {{"dims", dims}, {"launches", ordered_json::array()}};
      for (const auto& l : cp.launches)
        c["launches"].push_back({{"kernel", l.kernel},
                                 {"grid", l.grid},
                                 {"block", l.block},
                                 {"shared_bytes", l.shared_bytes}});
      j["configurations"].push_back(c);
    }
    j["log"] = log;
    std::cout << j.dump(2, ' ', false, ordered_json::error_handler_t::replace) << "\n";
    return r.ok() ? kExitOk : kExitFindings;
  }
  std::string tuned = tunables_text(r.tunables);
  std::cout << "task        " << task.id() << "\n"
            << "target      " << facts.arch << " ("
            << (facts.measured ? "GPU 0" : "assumed: " + std::to_string(facts.num_sms) + " SMs")
            << "), NVRTC " << nv.major << "." << nv.minor << "\n";
  if (!r.identity.empty())
    std::cout << "candidate   " << r.identity << (tuned.empty() ? "" : "  (" + tuned + ")") << "\n";
  if (r.stage > compile::Stage::Compile ||
      (r.stage == compile::Stage::Compile && r.module.compile_ms > 0))
    std::cout << "compile     " << (r.module.ok ? "ok" : "failed")
              << (r.module.cache_hit ? " (from the cache; the compile took " : " in ") << std::fixed
              << std::setprecision(0) << r.module.compile_ms << " ms"
              << (r.module.cache_hit ? ")" : " (not in the cache)") << "\n";
  if (!r.kernels.empty()) {
    Table t({"KERNEL", "SIGNATURE", "REGS", "SMEM", "STACK", "SPILLS"});
    for (const auto& k : r.kernels)
      t.add({k.name, k.signature.empty() ? k.lowered + " (extern \"C\")" : k.signature,
             std::to_string(k.resources.registers),
             std::to_string(k.resources.static_shared_bytes) + " B",
             std::to_string(k.resources.stack_bytes) + " B",
             std::to_string(k.resources.spill_store_bytes) + "/" +
                 std::to_string(k.resources.spill_load_bytes) + " B"});
    std::cout << "\n";
    t.print();
  }
  if (!r.configurations.empty()) {
    std::cout << "\n";
    Table t({"DIMS", "LAUNCH", "GRID", "BLOCK", "DYN SMEM"});
    for (const auto& [dims, cp] : r.configurations)
      for (size_t i = 0; i < cp.launches.size(); ++i)
        t.add({i == 0 ? tasks::format_dims(dims) : "", cp.launches[i].kernel,
               dim3(cp.launches[i].grid), dim3(cp.launches[i].block),
               std::to_string(cp.launches[i].shared_bytes)});
    t.print();
  }
  if (r.ok()) {
    std::cout << "\nok: plan, types and limits hold on " << r.configurations.size()
              << " configuration(s)\n";
    return kExitOk;
  }
  std::cout << "\nrejected at the " << compile::stage_name(r.stage) << " stage:\n";
  for (const auto& e : r.errors) std::cout << "  " << printable(e) << "\n";
  return kExitFindings;
}

}  // namespace

void add_compile_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<CompileArgs>();
  auto* cmd = app.add_subcommand("compile", command_description("compile"));
  cmd->add_option("candidate", a->source_file, "CUDA source of the candidate (device code only)");
  cmd->add_option("--plan", a->plan_file, "JSON launch plan");
  cmd->add_option("--answer", a->answer_file,
                  "A whole LLM answer in markdown (docs/answer-format.md)");
  add_kernelbench_options(cmd, a->kernelbench);
  cmd->add_option("--task", a->task,
                  "Task file, suite/name or name (default: the one --answer names)");
  cmd->add_option("--arch", a->arch, "Target architecture (default: GPU 0's, else sm_90a)");
  cmd->add_option("--tune", a->tune,
                  "Tunable values NAME=V (default: the first valid combination)");
  cmd->add_option("--tasks-dir", a->tasks_dir, "Folder holding the suites");
  cmd->add_option("--time-limit", a->time_limit_s, "Seconds before a compile is killed")
      ->capture_default_str();
  cmd->add_option("--emit", a->emit_dir,
                  "Write candidate.ptx, candidate.cubin and the compiled source to this folder");
  cmd->add_flag("--no-cache", a->no_cache, "Compile even when the cache has the result");
  cmd->add_flag("--in-process", a->in_process,
                "Compile in this process instead of a worker (debugging)");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  add_wide_flag(cmd);
  auto ref_limit = std::make_shared<std::string>();
  auto* ref_limit_opt = cmd->add_option("--reference-time-limit", *ref_limit,
                                        "Seconds the task's reference may run for its outputs' "
                                        "dtypes (default: $KFORGE_REFERENCE_TIME_LIMIT, else 20)");
  cmd->callback([&exit_code, a, ref_limit, ref_limit_opt] {
    if (ref_limit_opt->count()) a->reference_time_limit = *ref_limit;
    exit_code = run_compile(*a);
  });
}

}  // namespace kforge::cli
