// `kforge tasks list | show | check`.
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command_list.h"
#include "commands.h"
#include "kforge/common/strings.h"
#include "kforge/tasks/check.h"
#include "kforge/tasks/reference.h"
#include "kforge/tasks/reference_child.h"
#include "kforge/tasks/task.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/gpu_generator.h"
#include "progress.h"
#include "table.h"
#include "tasks_check.h"

namespace kforge::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  std::ostringstream os;
  os << std::setprecision(3) << b << " " << units[u];
  return os.str();
}

std::string general(double v) {
  std::ostringstream os;
  os << std::setprecision(4) << v;
  return os.str();
}

std::vector<tasks::Task> load_specs(const std::vector<std::string>& specs, const fs::path& root) {
  std::vector<tasks::Task> out;
  for (const std::string& spec : specs)
    for (const fs::path& f : tasks::resolve_tasks(spec, root)) out.push_back(tasks::load_task(f));
  return out;
}

std::vector<std::string> all_suites(const fs::path& root) {
  std::vector<std::string> suites;
  if (!fs::is_directory(root))
    throw UsageError("the tasks folder " + root.string() +
                     " does not exist (set KFORGE_TASKS or --tasks-dir)");
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) {
      for (const auto& f : fs::directory_iterator(e.path()))
        if (f.path().extension() == ".toml") {
          suites.push_back(e.path().filename().string());
          break;
        }
    }
  std::sort(suites.begin(), suites.end());
  return suites;
}

// What a task file marks it degenerate for (`degenerate = [...]`), empty when it does not load.
std::vector<std::string> marked_degenerate(const fs::path& file) {
  try {
    return tasks::load_task(file).degenerate;
  } catch (const Error&) {
    return {};  // the check says why
  }
}

int run_list(const std::vector<std::string>& specs_in, const fs::path& root, bool as_json) {
  std::vector<std::string> specs = specs_in.empty() ? all_suites(root) : specs_in;
  std::vector<tasks::Task> ts = load_specs(specs, root);
  if (as_json) {
    ordered_json j = ordered_json::array();
    for (const auto& t : ts)
      j.push_back({{"id", t.id()},
                   {"file", t.file.string()},
                   {"summary", t.summary},
                   {"tags", t.tags},
                   {"degenerate", t.degenerate}});
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  Table table({"TASK", "INPUTS", "TIMED DIMS", "SUMMARY"});
  for (const auto& t : ts) {
    std::string inputs;
    for (const auto& in : t.inputs)
      inputs +=
          (inputs.empty() ? "" : " ") + in.name + ":" + std::string(tasks::dtype_name(in.dtype));
    // A task the import found degenerate says so first (docs/task-format.md).
    table.add({t.id(), inputs, tasks::format_dims(t.dims),
               (t.degenerate.empty() ? "" : "[degenerate] ") + t.summary});
  }
  table.print();
  std::cout << ts.size() << " task(s)\n";
  return kExitOk;
}

int run_show(const std::string& spec, const fs::path& root, bool as_json,
             const std::optional<std::string>& time_limit) {
  std::vector<fs::path> files = tasks::resolve_tasks(spec, root);
  if (files.size() != 1)
    throw UsageError("'" + spec + "' names a suite; `kforge tasks show` takes one task");
  tasks::ReferenceLimits limits =
      tasks::reference_limits(time_limit, tasks::kShapesReferenceSeconds);
  tasks::Task t = tasks::load_task(files[0]);
  tasks::ShapeFacts facts = tasks::ReferenceChild(limits).shape_facts(t);
  const auto& outs = facts.outputs;
  const auto& bytes = facts.bytes;
  std::optional<double> flops;
  if (t.flops) flops = t.flops->eval_real(t.dims);

  ordered_json j;
  j["id"] = t.id();
  j["file"] = t.file.string();
  j["version"] = t.content_hash;
  j["summary"] = t.summary;
  j["tags"] = t.tags;
  j["degenerate"] = t.degenerate;
  j["dims"] = t.dims;
  j["check_dims"] = t.check_dims;
  j["inputs"] = ordered_json::array();
  for (const auto& in : t.inputs) {
    ordered_json i = {{"name", in.name},
                      {"dtype", tasks::dtype_name(in.dtype)},
                      {"shape", tasks::shape_expressions(in)},
                      {"timed_shape", t.shape_of(in, t.dims)},
                      {"init", in.init.text}};
    if (in.init.range_shift != 0) i["range_shift"] = in.init.range_shift;
    if (!in.transform.empty()) {  // a computed input (docs/task-format.md)
      i["transform"] = in.transform;
      if (in.draw_dtype) i["draw_dtype"] = tasks::dtype_name(*in.draw_dtype);
      i["draws"] = ordered_json::array();
      for (const auto& d : in.draws)
        i["draws"].push_back({{"name", d.name},
                              {"dtype", tasks::dtype_name(d.dtype)},
                              {"shape", tasks::shape_expressions(d)},
                              {"init", d.init.text}});
    }
    j["inputs"].push_back(i);
  }
  j["outputs"] = ordered_json::array();
  j["outputs_fitted"] = facts.fitted;  // from CPU runs at the check dims, not the meta device
  std::vector<std::string> names = tasks::output_names(t, facts.output_count);
  for (size_t i = 0; i < names.size(); ++i) {
    ordered_json o = {{"name", names[i]}};
    if (outs) o["timed_shape"] = (*outs)[i].sizes, o["dtype"] = tasks::dtype_name((*outs)[i].dtype);
    if (i < facts.output_exprs.size()) o["shape"] = facts.output_exprs[i];
    if (!t.outputs.empty() && t.outputs[i].tolerance) o["tolerance"] = *t.outputs[i].tolerance;
    j["outputs"].push_back(o);
  }
  std::vector<std::string> constraints;
  for (const auto& c : t.constraints) constraints.push_back(c.text());
  j["constraints"] = constraints;
  j["deterministic"] = t.deterministic;
  j["allow_tf32"] = t.allow_tf32;
  j["input_bytes"] = t.input_bytes(t.dims);
  j["bytes_that_must_move"] = bytes ? ordered_json(*bytes) : ordered_json(nullptr);
  j["bytes_source"] = t.min_bytes ? "min_bytes" : "inputs read once + outputs written once";
  j["flops"] = flops ? ordered_json(*flops) : ordered_json(nullptr);
  j["reference"] = t.reference;
  if (as_json) {
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << t.id() << ": " << t.summary << "\n"
            << "  file         " << t.file.string() << " (version " << t.content_hash.substr(0, 12)
            << ")\n";
  if (!t.tags.empty()) {
    std::string tags;
    for (const auto& tag : t.tags) tags += (tags.empty() ? "" : ", ") + tag;
    std::cout << "  tags         " << tags << "\n";
  }
  // The import's findings (docs/task-format.md): a kernel can meet such a task without the work.
  for (const auto& d : t.degenerate) std::cout << "  DEGENERATE   " << d << "\n";
  std::cout << "  timed dims   " << tasks::format_dims(t.dims) << "\n";
  for (const auto& d : t.check_dims)
    std::cout << "  check dims   " << tasks::format_dims(d) << "\n";
  for (const auto& c : t.constraints) std::cout << "  constraint   " << c.text() << "\n";
  if (t.deterministic) std::cout << "  deterministic: bitwise-identical runs required\n";
  std::cout << "\n";
  Table table({"", "NAME", "DTYPE", "SHAPE", "TIMED SHAPE", "INIT"});
  for (const auto& in : t.inputs)
    table.add({"input", in.name, std::string(tasks::dtype_name(in.dtype)),
               tasks::shape_expressions(in), format_shape(t.shape_of(in, t.dims)),
               tasks::values_text(in)});
  for (size_t i = 0; i < names.size(); ++i)
    table.add({"output", names[i], outs ? std::string(tasks::dtype_name((*outs)[i].dtype)) : "?",
               i < facts.output_exprs.size() ? "[" + join(facts.output_exprs[i], ", ") + "]" : "",
               outs ? format_shape((*outs)[i].sizes)
                    : "(unknown: an op has no meta kernel, and the CPU runs could not tell)",
               ""});
  table.print();
  if (facts.fitted)
    std::cout << "  (output shapes fitted from the reference run on the CPU at the check dims: "
                 "LibTorch's meta device lacks an op)\n";
  std::cout << "\n  bytes that must move  "
            << (bytes ? human_bytes(*bytes) + " (" + j["bytes_source"].get<std::string>() + ")"
                      : "unknown")
            << "\n";
  std::cout << "  FLOPs                 " << (flops ? general(*flops) : "not declared") << "\n";
  if (flops && bytes)
    std::cout << "  arithmetic intensity  " << fixed(*flops / *bytes, 2) << " FLOP/byte\n";
  std::cout << "\nreference:\n" << t.reference;
  if (!t.reference.empty() && t.reference.back() != '\n') std::cout << "\n";
  return kExitOk;
}

// On the CPU, timed dims past this many bytes of inputs (or of the task's declared traffic) take
// minutes and may exhaust the memory: `tasks check` asks for --force or smaller dims first.
constexpr int64_t kCpuTimedBytes = 1000000000;

// The tasks among `files` whose timed dims move more than kCpuTimedBytes, with their sizes.
std::vector<std::pair<std::string, int64_t>> too_big_for_cpu(const std::vector<fs::path>& files) {
  std::vector<std::pair<std::string, int64_t>> big;
  for (const fs::path& f : files) {
    try {
      tasks::Task t = tasks::load_task(f);
      int64_t bytes = t.input_bytes(t.dims);
      if (t.min_bytes)
        bytes = std::max(bytes, static_cast<int64_t>(t.min_bytes->eval_real(t.dims)));
      if (bytes > kCpuTimedBytes) big.emplace_back(t.id(), bytes);
    } catch (const Error&) {
      // a malformed task is the check's own finding
    }
  }
  return big;
}

}  // namespace

int run_check(const CheckArgs& a, const fs::path& root) {
  tasks::CheckOptions opt;
  opt.seed = a.seed;
  if (a.device == "cuda") {
    verify::Driver::get().require("kforge tasks check --device cuda");
    opt.device = torch::Device(torch::kCUDA, 0);
    opt.generator = verify::cuda_generator(0);
  } else if (a.device != "cpu") {
    throw InputError("--device", std::nullopt, "", "must be cpu or cuda, got '" + a.device + "'");
  }
  std::string dims = a.dims.empty() ? (a.device == "cuda" ? "timed" : "check") : a.dims;
  if (dims == "timed")
    opt.dims = tasks::DimsSelection::Timed;
  else if (dims == "check")
    opt.dims = tasks::DimsSelection::Check;
  else if (dims == "all")
    opt.dims = tasks::DimsSelection::All;
  else
    throw InputError("--dims", std::nullopt, "", "must be timed, check or all, got '" + dims + "'");
  opt.timing_runs = a.timing_runs >= 0 ? a.timing_runs : (a.device == "cuda" ? 5 : 0);
  tasks::ReferenceChild child(tasks::reference_limits(
      a.reference_time_limit, tasks::kCheckReferenceSeconds));  // one for every task

  std::vector<std::string> specs = a.specs.empty() ? all_suites(root) : a.specs;
  std::vector<fs::path> files;
  for (const auto& s : specs)
    for (const auto& f : tasks::resolve_tasks(s, root)) files.push_back(f);

  if (a.device == "cpu" && opt.dims != tasks::DimsSelection::Check && !a.force)
    if (auto big = too_big_for_cpu(files); !big.empty()) {
      std::string list;
      for (const auto& [id, bytes] : big)
        list += "\n  " + id + ": " + human_bytes(static_cast<double>(bytes));
      throw UsageError(
          "--dims " + dims + " on the CPU: " + std::to_string(big.size()) +
          " task(s) move more than " + human_bytes(static_cast<double>(kCpuTimedBytes)) +
          " at their timed dims, which takes minutes and may exhaust the memory:" + list +
          "\nCheck them on a GPU (--device cuda), with --dims check, or pass --force to run them "
          "here.");
    }
  if (!a.json)
    std::cout << "checking " << files.size() << " task(s) on " << a.device << ", " << dims
              << " dims, seed " << a.seed << "\n";
  ordered_json all = ordered_json::array();
  int failed = 0;
  Progress progress;
  size_t index = 0;
  for (const fs::path& f : files) {
    tasks::TaskCheck c;
    std::string id = f.parent_path().filename().string() + "/" + f.stem().string();
    std::string counter =
        "[" + std::to_string(++index) + "/" + std::to_string(files.size()) + "] " + id;
    progress.show(counter);
    child.on_step([&](const std::string& step) { progress.show(counter + " " + step); });
    opt.on_config = [&](const std::string& where) { progress.show(counter + " on " + where); };
    auto t0 = std::chrono::steady_clock::now();
    if (a.device == "cpu") {
      c = child.check(f, opt);  // a reference that never returns fails its task
    } else {
      try {
        tasks::Task t = tasks::load_task(f);
        c = tasks::check_task(t, opt);
      } catch (const InputError& e) {
        c.task = id;
        c.problems.push_back(e.what());
      }
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress.clear();
    if (!c.ok()) ++failed;
    if (a.on_checked) a.on_checked(f, c);
    if (a.json) {
      all.push_back(tasks::check_to_json(c));
      continue;
    }
    std::string ms;
    for (const auto& cr : c.configs)
      if (cr.timed && cr.reference_ms > 0)
        ms = "  reference " + fixed(cr.reference_ms, 3) + " ms, " + human_bytes(cr.bytes_moved) +
             " (" + fixed(cr.bytes_moved / cr.reference_ms / 1e9, 2) + " TB/s)";
    std::string shapes;
    for (const auto& cr : c.configs)
      if (!cr.outputs.empty() && (cr.timed || shapes.empty())) {
        shapes.clear();
        for (const auto& o : cr.outputs)
          shapes += (shapes.empty() ? "" : " ") + o.name + format_shape(o.shape);
      }
    std::cout << (c.ok() ? "ok    " : "FAIL  ") << std::left << std::setw(36) << c.task << " "
              << c.configs.size() << " config(s)  " << fixed(secs, 2) << " s" << ms << "  "
              << shapes << std::endl;
    for (const auto& p : c.problems) std::cout << "      " << p << "\n";
    for (const auto& n : c.notes) std::cout << "      note: " << n << "\n";
    for (const auto& d : marked_degenerate(f))
      std::cout << "      marked degenerate: " << d << "\n";
    if (a.verbose)
      for (const auto& cr : c.configs)
        for (const auto& o : cr.outputs)
          std::cout << "      " << tasks::format_dims(cr.dims) << "  " << o.name << " " << o.dtype
                    << format_shape(o.shape) << " min " << general(o.min) << " max "
                    << general(o.max) << " mean " << general(o.mean) << " rms " << general(o.rms)
                    << "\n";
  }
  if (a.json)
    std::cout << all.dump(2) << "\n";
  else
    std::cout << files.size() - failed << " of " << files.size() << " task(s) ok, " << failed
              << " failing\n";
  return failed ? kExitFindings : kExitOk;
}

void add_tasks_command(CLI::App& app, int& exit_code) {
  auto* tasks_cmd = app.add_subcommand("tasks", command_description("tasks"));
  tasks_cmd->require_subcommand(1);
  auto root = std::make_shared<std::string>();
  tasks_cmd->add_option(
      "--tasks-dir", *root,
      "Folder holding the suites (default: $KFORGE_TASKS, ./tasks, or the source tree's)");
  add_wide_flag(tasks_cmd);  // list and show print tables
  auto root_path = [root] { return root->empty() ? tasks::default_tasks_root() : fs::path(*root); };

  auto* list =
      tasks_cmd->add_subcommand("list", "List tasks of every suite, or of the given suites");
  auto list_specs = std::make_shared<std::vector<std::string>>();
  auto list_json = std::make_shared<bool>(false);
  list->add_flag("--json", *list_json, "Machine-readable output");
  list->add_option("suite", *list_specs, "Suite name or folder (default: all)");
  list->callback([&exit_code, list_specs, list_json, root_path] {
    exit_code = run_list(*list_specs, root_path(), *list_json);
  });

  auto* show =
      tasks_cmd->add_subcommand("show", "Show a task: inputs, dims, reference, bytes and FLOPs");
  auto show_spec = std::make_shared<std::string>();
  auto show_json = std::make_shared<bool>(false);
  show->add_flag("--json", *show_json, "Machine-readable output");
  show->add_option("task", *show_spec, "Task file, suite/name or name")->required();
  auto show_limit = std::make_shared<std::string>();
  auto* show_limit_opt = show->add_option("--reference-time-limit", *show_limit,
                                          "Seconds the reference may run for the output shapes "
                                          "(default: $KFORGE_REFERENCE_TIME_LIMIT, else 20)");
  show->callback([&exit_code, show_spec, show_json, show_limit, show_limit_opt, root_path] {
    std::optional<std::string> limit;
    if (show_limit_opt->count()) limit = *show_limit;
    exit_code = run_show(*show_spec, root_path(), *show_json, limit);
  });

  auto* check = tasks_cmd->add_subcommand(
      "check", "Run references on their configurations and flag degenerate tasks");
  for (auto* sub : {list, show, check})
    sub->fallthrough();  // --tasks-dir may follow the subcommand
  auto args = std::make_shared<CheckArgs>();
  check->add_option("tasks", args->specs, "Suites, task files or names (default: every suite)");
  check->add_option("--device", args->device, "cpu or cuda")->capture_default_str();
  check->add_option("--dims", args->dims,
                    "timed, check or all (default: timed on cuda, check on cpu)");
  check->add_option("--seed", args->seed, "Seed of the input generator")->capture_default_str();
  check->add_option(
      "--time", args->timing_runs,
      "Time the reference this many runs per configuration (default: 5 on cuda, 0 on cpu)");
  check->add_flag("--json", args->json, "Machine-readable output");
  check->add_flag("-v,--verbose", args->verbose, "Print output statistics per configuration");
  check->add_flag("--force", args->force,
                  "Run timed dims on the CPU even when they move more than 1 GB");
  auto check_limit = std::make_shared<std::string>();
  auto* check_limit_opt =
      check->add_option("--reference-time-limit", *check_limit,
                        "On the CPU, seconds the reference may take per configuration (default: "
                        "$KFORGE_REFERENCE_TIME_LIMIT, else 60)");
  check->callback([&exit_code, args, check_limit, check_limit_opt, root_path] {
    if (check_limit_opt->count()) args->reference_time_limit = *check_limit;
    exit_code = run_check(*args, root_path());
  });
  add_import_kernelbench_command(tasks_cmd, exit_code, root_path);
}

}  // namespace kforge::cli
