#include "candidate_input.h"

#include <algorithm>
#include <charconv>

#include "kforge/common/files.h"
#include "kforge/common/strings.h"
#include "kforge/compile/answer.h"
#include "kforge/compile/kernelbench_answer.h"
#include "kforge/compile/module.h"
#include "kforge/compile/nvrtc.h"
#include "kforge/tasks/kernelbench_answer.h"
#include "kforge/verify/device_facts.h"
#include "kforge/verify/driver.h"

namespace kforge::cli {
namespace {

std::string read_or_fail(const std::string& path, const std::string& what) {
  auto text = read_file(path);
  if (!text) throw InputError(path, std::nullopt, "", "cannot read the " + what);
  return *text;
}

}  // namespace

CandidateInput read_candidate(const CandidateFiles& f, const std::string& command) {
  CandidateInput in;
  if (!f.answer_file.empty()) {
    if (!f.source_file.empty() || !f.plan_file.empty())
      throw InputError("--answer", std::nullopt, "",
                       "give either --answer FILE.md or CANDIDATE.cu with --plan, not both");
    try {
      std::string markdown = read_or_fail(f.answer_file, "answer");
      in.task_named = compile::task_named_in(markdown);
      compile::Answer ans = compile::parse_answer(markdown);
      in.source = ans.source;
      in.plan = ans.plan;
      in.label = f.answer_file;
      in.first_line = ans.source_first_line;
    } catch (const compile::AnswerError& e) {
      in.answer_error = e.what();
    }
    return in;
  }
  if (f.source_file.empty() || f.plan_file.empty())
    throw InputError(command, std::nullopt, "",
                     "needs CANDIDATE.cu and --plan PLAN.json, or --answer FILE.md");
  in.source = read_or_fail(f.source_file, "candidate source");
  in.plan = read_or_fail(f.plan_file, "plan");
  in.label = f.source_file;
  return in;
}

namespace {

// The task's outputs as the conversion checks the wrapper's result: names and dtypes, and the
// reference's sizes at the timed dims where they are known without a GPU.
std::vector<compile::KernelBenchOutput> kernelbench_outputs(const tasks::Task& task,
                                                            tasks::ReferenceChild& reference) {
  std::vector<tasks::OutputInfo> infos = reference.outputs(task);
  tasks::ShapeFacts facts = reference.shape_facts(task);
  std::vector<compile::KernelBenchOutput> out;
  for (size_t k = 0; k < infos.size(); ++k) {
    compile::KernelBenchOutput o{infos[k].name, infos[k].dtype, infos[k].rank, std::nullopt};
    if (facts.outputs && k < facts.outputs->size()) o.timed_sizes = (*facts.outputs)[k].sizes;
    out.push_back(o);
  }
  return out;
}

}  // namespace

CandidateInput read_kernelbench_candidate(const KernelBenchFlags& flags,
                                          const CandidateFiles& files, const tasks::Task& task,
                                          tasks::ReferenceChild& reference, std::ostream& notes) {
  if (!files.source_file.empty() || !files.plan_file.empty() || !files.answer_file.empty())
    throw InputError("--kernelbench", std::nullopt, "",
                     "give either --kernelbench ANSWER.py, --answer FILE.md or CANDIDATE.cu with "
                     "--plan, not several");
  nlohmann::json parsed = tasks::read_kernelbench_answer(flags.file, flags.python);
  CandidateInput in;
  in.label = flags.file;
  in.task_named = task.id();
  try {
    compile::KernelBenchCandidate c = compile::convert_kernelbench_answer(
        parsed, flags.file, task, kernelbench_outputs(task, reference));
    in.source = c.source;
    in.plan = c.plan;
    in.first_line = c.first_line;
    notes << "kernelbench " << flags.file << ": converted for " << task.id()
          << " (device code, and a plan read from its host wrapper)\n";
    for (const std::string& n : c.notes) notes << "  note: " << printable(n) << "\n";
    if (!flags.write.empty()) {
      write_file_atomic(flags.write, compile::kernelbench_markdown(c, task, flags.file));
      notes << "  written to " << flags.write << " (kforge compile --answer " << flags.write
            << ")\n";
    }
  } catch (const compile::KernelBenchRefused& e) {
    in.answer_error = std::string("the KernelBench answer does not convert: ") + e.what();
    if (!flags.write.empty()) notes << "  nothing written to " << flags.write << "\n";
  }
  return in;
}

tasks::Task kernelbench_task_of(const std::string& task_flag, const std::string& tasks_dir) {
  if (task_flag.empty())
    throw InputError("--task", std::nullopt, "",
                     "--kernelbench needs --task: the task the answer is for");
  return load_one_task(task_flag, tasks_dir);
}

void check_kernelbench_flags(const KernelBenchFlags& flags) {
  if (!flags.write.empty())
    throw InputError("--write-candidate", std::nullopt, "", "only with --kernelbench");
  if (!flags.python.empty())
    throw InputError("--python", std::nullopt, "", "only with --kernelbench");
}

void add_kernelbench_options(CLI::App* cmd, KernelBenchFlags& flags) {
  cmd->add_option("--kernelbench", flags.file,
                  "A KernelBench answer (Python: ModelNew calling a load_inline CUDA extension), "
                  "converted without running it; needs --task");
  cmd->add_option("--python", flags.python,
                  "The Python that parses --kernelbench's file (default: $KFORGE_PYTHON, else "
                  "python3); only its ast module is used");
  cmd->add_option("-o,--write-candidate", flags.write,
                  "With --kernelbench: write the derived candidate as a kforge answer (markdown) "
                  "to this file, to read or edit");
}

tasks::Task load_one_task(const std::string& spec, const std::string& tasks_dir) {
  std::filesystem::path root =
      tasks_dir.empty() ? tasks::default_tasks_root() : std::filesystem::path(tasks_dir);
  std::vector<std::filesystem::path> files = tasks::resolve_tasks(spec, root);
  if (files.size() != 1) throw UsageError("--task '" + spec + "' names a suite; give one task");
  return tasks::load_task(files[0]);
}

tasks::Task load_candidate_task(const std::string& task_flag, const CandidateInput& in,
                                const std::string& tasks_dir) {
  if (!task_flag.empty()) return load_one_task(task_flag, tasks_dir);
  if (in.task_named.empty())
    throw InputError("--task", std::nullopt, "",
                     "which task? Give --task, or an --answer whose first line names it (<!-- "
                     "task: suite/name -->)");
  return load_one_task(in.task_named, tasks_dir);
}

evolve::Proposal proposal(const CandidateInput& in, std::shared_ptr<const tasks::Task> task,
                          const std::vector<std::string>& tune) {
  evolve::Proposal p;
  p.task = std::move(task);
  p.source = in.source;
  p.plan = in.plan;
  p.label = in.label;
  p.first_line = in.first_line;
  p.answer_error = in.answer_error;
  if (!tune.empty()) p.tunables = parse_tune(tune);
  return p;
}

std::string device_line(const verify::DeviceInfo& g) {
  return g.name + " (sm_" + std::to_string(g.cc_major) + std::to_string(g.cc_minor) + ", " +
         std::to_string(g.sm_count) + " SMs, " + std::to_string(g.l2_bytes >> 20) + " MiB L2, " +
         std::to_string(g.max_shared_per_block_optin) + " bytes of shared memory per block)";
}

std::string device_line() {
  if (verify::Driver::get().available()) return device_line(verify::list_devices().at(0));
  return "An NVIDIA Hopper GPU, sm_90a (H100/H200 class: 132 SMs, 50-60 MiB L2, 232448 bytes of "
         "shared memory per block)";
}

evolve::PromptGpu prompt_gpu() {
  if (!verify::Driver::get().available()) {
    evolve::PromptGpu g;
    g.plan = facts_for("");
    return g;
  }
  return prompt_gpu(verify::list_devices().at(0), facts_for(""), verify::device_facts(0));
}

evolve::PromptGpu prompt_gpu(const verify::DeviceInfo& gpu, const compile::DeviceFacts& plan,
                             std::optional<verify::MeasuredFacts> measured) {
  evolve::PromptGpu g;
  g.plan = plan;
  g.name = gpu.name;
  g.l2_bytes = gpu.l2_bytes;
  if (gpu.memory_clock_khz > 0 && gpu.memory_bus_bits > 0)  // double data rate
    g.spec_gbps = 2.0 * gpu.memory_clock_khz * 1e3 * (gpu.memory_bus_bits / 8.0) / 1e9;
  g.measured = std::move(measured);
  return g;
}

compile::DeviceFacts facts_for(const std::string& arch_flag) {
  if (!arch_flag.empty())
    if (std::string problem = compile::arch_problem(arch_flag); !problem.empty())
      throw InputError("--arch", std::nullopt, "", problem);
  const verify::Driver& driver = verify::Driver::get();
  if (driver.available()) {
    compile::DeviceFacts f = verify::plan_facts(0);
    if (!arch_flag.empty()) f.arch = arch_flag;
    return f;
  }
  return compile::DeviceFacts::for_arch(arch_flag.empty() ? "sm_90a" : arch_flag);
}

std::string tunables_text(const compile::Tunables& t, const std::string& separator) {
  std::string out;
  for (const auto& [k, v] : t) out += (out.empty() ? "" : separator) + k + "=" + std::to_string(v);
  return out;
}

void check_tune(const std::string& plan_text, const tasks::Task& task,
                const std::vector<compile::TensorInfo>& tensors, const compile::Tunables& chosen) {
  std::optional<compile::Plan> plan;
  try {
    plan = compile::parse_plan_text(plan_text, task, tensors);
  } catch (const std::exception&) {
    return;
  }
  for (const auto& [name, value] : chosen) {
    std::string item = "--tune " + name + "=" + std::to_string(value) + ": ";
    auto it = std::find_if(plan->tune.begin(), plan->tune.end(),
                           [&](const auto& t) { return t.first == name; });
    if (it == plan->tune.end()) {
      std::vector<std::string> names;
      for (const auto& t : plan->tune) names.push_back(t.first);
      throw UsageError(item + "the plan has no tunable " + name +
                       " (its tunables: " + (names.empty() ? "none" : join(names, ", ")) + ")");
    }
    if (std::find(it->second.begin(), it->second.end(), value) == it->second.end()) {
      std::vector<std::string> values;
      for (int64_t v : it->second) values.push_back(std::to_string(v));
      throw UsageError(item + "not one of the plan's values of " + name + " (" +
                       join(values, ", ") + ")");
    }
  }
}

compile::Tunables parse_tune(const std::vector<std::string>& items) {
  compile::Tunables t;
  for (const auto& item : items) {
    size_t eq = item.find('=');
    std::string name = eq == std::string::npos ? "" : item.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    int64_t v = 0;
    // The whole value must be the integer: "128abc" is not 128.
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (!is_identifier(name) || value.empty() || ec != std::errc() ||
        end != value.data() + value.size())
      throw InputError(
          "--tune", std::nullopt, "",
          "'" + printable(item) + "' is not NAME=integer (a 64-bit integer, nothing after it)");
    t[name] = v;
  }
  return t;
}

}  // namespace kforge::cli
