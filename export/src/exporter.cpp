#include "kforge/export/exporter.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "kforge/archive/archive.h"
#include "kforge/archive/export_view.h"
#include "kforge/archive/location.h"
#include "kforge/common/baseline.h"
#include "kforge/common/error.h"
#include "kforge/common/files.h"
#include "kforge/common/strings.h"
#include "kforge/tasks/generator.h"
#include "kforge/tasks/output_fit.h"
#include "kforge/tasks/reference.h"
#include "kforge/tasks/transform.h"
#include "kforge/verify/outcome.h"

namespace kforge::exporter {

namespace {

using nlohmann::json;

// A winner as the archive holds it.
struct Winner {
  std::string task;  // suite/name
  std::string definition, version;
  int64_t candidate = 0;
  std::string identity, source, plan, model, prompt_kind;
  json tunables, evaluation;
};

// The best baseline's kind ("compiled"), the one "speedup"."best" is over; null without one.
json best_baseline(const BaselineTimes& b) {
  std::optional<BaselineMs> best = b.best();
  return best ? json(std::string(to_string(best->kind))) : json(nullptr);
}

bool selected(const ExportOptions& o, const std::string& task) {
  if (o.suites.empty() && o.tasks.empty()) return true;
  std::string suite = task.substr(0, task.find('/'));
  std::string name = task.substr(task.find('/') + 1);
  for (const std::string& s : o.suites)
    if (s == suite) return true;
  for (const std::string& t : o.tasks)
    if (t == task || t == name) return true;
  return false;
}

// Each selected task's best kernel (the winner rule, kforge/archive/winner.h) judged on one of the
// architectures asked, by this harness version; the tasks with none, and why.
std::vector<Winner> winners(archive::Archive& ar, const ExportOptions& o,
                            std::vector<Missing>& missing) {
  int harness = o.harness_version ? o.harness_version : verify::kHarnessVersion;
  archive::ExportScope scope{o.archs, harness, !o.include_unadmitted};
  std::vector<Winner> out;
  std::set<std::string> seen;
  for (const archive::ExportKernel& k : archive::export_kernels(ar, scope)) {
    if (!selected(o, k.task)) continue;
    seen.insert(k.task);
    Winner w;
    w.task = k.task;
    w.definition = k.definition;
    w.version = k.version;
    w.candidate = k.candidate.value;
    w.identity = k.identity;
    w.source = k.source;
    w.plan = k.plan;
    w.tunables = k.tunables;
    w.model = k.model;
    w.prompt_kind = k.prompt_kind;
    auto real = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
    w.evaluation = {{"device", k.device},
                    {"arch", k.arch},
                    {"driver", k.driver},
                    {"toolchain", k.toolchain},
                    {"harness_version", k.harness_version},
                    {"judged_at", k.judged_at},
                    {"time_ms", real(k.time_ms)},
                    {"baselines", k.baselines.to_json()},
                    {"speedup", k.baselines.speedups_json(k.time_ms)},
                    {"best_baseline", best_baseline(k.baselines)},
                    {"roofline_fraction", real(k.roofline_fraction)},
                    {"run", k.run ? json(*k.run) : json(nullptr)},
                    {"generation", k.generation},
                    {"admitted", k.admitted}};
    out.push_back(std::move(w));
  }
  // Selected tasks the archive knows but that have no winner (and the harness versions that judged
  // one).
  std::map<std::string, std::vector<int64_t>> other_versions =
      archive::winning_harness_versions(ar, scope);
  for (const std::string& task : archive::task_names(ar)) {
    if (!selected(o, task) || seen.count(task)) continue;
    std::string why = std::string("no correct, unflagged") +
                      (o.include_unadmitted ? "" : ", admitted") + " kernel judged on " +
                      join(o.archs, " or ") + " by harness version " + std::to_string(harness);
    if (auto v = other_versions.find(task); v != other_versions.end()) {
      std::vector<std::string> versions;
      for (int64_t h : v->second) versions.push_back(std::to_string(h));
      why += " (harness version " + join(versions, ", ") + " judged one: --harness " +
             versions.back() + " exports it)";
    }
    missing.push_back({task, why});
  }
  for (const std::string& want : o.tasks)
    if (std::none_of(out.begin(), out.end(),
                     [&](const Winner& w) {
                       return w.task == want || w.task.substr(w.task.find('/') + 1) == want;
                     }) &&
        std::none_of(missing.begin(), missing.end(),
                     [&](const Missing& m) { return m.task == want; }))
      missing.push_back({want, "the archive has no task of that name"});
  return out;
}

// The task file, as it was when its winner was judged (the archive keeps the reference and the
// file's hash, not the whole file): another version of the file is another task.
std::shared_ptr<const tasks::Task> task_of(const Winner& w,
                                           const std::filesystem::path& tasks_root) {
  std::vector<std::filesystem::path> files = tasks::resolve_tasks(w.task, tasks_root);
  auto task = std::make_shared<const tasks::Task>(tasks::load_task(files.at(0)));
  if (task->content_hash != w.version)
    throw Error(task->file.string() + " is not the version its winner was judged against (" +
                w.version.substr(0, 12) + "; the file is " + task->content_hash.substr(0, 12) +
                ")");
  return task;
}

int sm_of(const std::string& arch) {
  return compile::sm_number(arch);
}

json init_json(const tasks::Init& init, tasks::Dtype dtype, const tasks::Dims& d) {
  auto v = [&](size_t i) { return init.params.at(i).eval_real(d); };
  switch (init.kind) {
    case tasks::InitKind::Randn:
      return {{"kind", "normal"}, {"mean", 0.0}, {"std", 1.0}};
    case tasks::InitKind::Normal:
      return {{"kind", "normal"}, {"mean", v(0)}, {"std", v(1)}};
    case tasks::InitKind::Rand:
      if (dtype == tasks::Dtype::Bool) return {{"kind", "bernoulli"}, {"p", 0.5}};
      return {{"kind", "uniform"}, {"lo", 0.0}, {"hi", 1.0}};
    case tasks::InitKind::Uniform:
      return {{"kind", "uniform"}, {"lo", v(0)}, {"hi", v(1)}};
    case tasks::InitKind::Randint:
      return {{"kind", "randint"},
              {"lo", init.params.at(0).eval_int(d)},
              {"hi", init.params.at(1).eval_int(d)}};
    case tasks::InitKind::Bernoulli:
      return {{"kind", "bernoulli"}, {"p", v(0)}};
  }
  return nullptr;
}

// A C++ identifier for the task, unique in the package: its name, or suite_name when two suites
// share it.
std::string op_name(const std::string& task, const std::vector<Winner>& all) {
  std::string name = task.substr(task.find('/') + 1);
  int same = 0;
  for (const Winner& w : all) same += w.task.substr(w.task.find('/') + 1) == name;
  std::string id = same > 1 ? task : name;
  for (char& c : id)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  if (std::isdigit(static_cast<unsigned char>(id[0]))) id = "op_" + id;
  return id;
}

// The manifest entry's task part: tensors, sizes, the reference, every configuration with its
// inputs.
json task_entry(const Op& op, const std::string& version) {
  const tasks::Task& task = *op.task;
  json inputs = json::array(), outputs = json::array();
  size_t out_index = 0;
  for (const compile::TensorInfo& t : op.tensors) {
    if (t.role == compile::TensorRole::Input) {
      const tasks::InputSpec& in = task.inputs.at(inputs.size());
      json shape = json::array();
      for (const Expr& e : in.shape) shape.push_back(e.text());
      inputs.push_back(
          {{"name", t.name}, {"dtype", std::string(tasks::dtype_name(t.dtype))}, {"shape", shape}});
      if (!in.transform.empty())  // a computed input: the package's tests apply it as kforge does
        inputs.back()["transform"] = {
            {"text", in.transform},
            {"draw_dtype", std::string(tasks::dtype_name(in.drawn_dtype()))},
            {"function", "kforge_input_transform"},
            {"torchscript", tasks::prelude_source() +
                                tasks::rewrite_functional(tasks::transform_function(in),
                                                          task.file.string(), std::nullopt)}};
    } else if (t.role == compile::TensorRole::Output) {
      json shape = nullptr;  // unknown for a fallback whose outputs fit no expression
      if (out_index < op.output_shapes.size()) {
        shape = json::array();
        for (const Expr& e : op.output_shapes[out_index]) shape.push_back(e.text());
      }
      json tolerance = nullptr;  // the task's own, where it sets one
      if (out_index < task.outputs.size() && task.outputs[out_index].tolerance)
        tolerance = *task.outputs[out_index].tolerance;
      outputs.push_back({{"name", t.name},
                         {"dtype", std::string(tasks::dtype_name(t.dtype))},
                         {"shape", shape},
                         {"tolerance", tolerance}});
      ++out_index;
    }
  }
  std::vector<tasks::Dims> configs = task.check_dims;
  configs.push_back(task.dims);
  json config_list = json::array();
  for (size_t c = 0; c < configs.size(); ++c) {
    json ins = json::array();
    for (const tasks::InputSpec& in : task.inputs) {
      ins.push_back({{"shape", task.shape_of(in, configs[c])},
                     {"init", init_json(in.init, in.drawn_dtype(), configs[c])}});
      if (in.transform.empty()) continue;
      json draws = json::array();
      for (const tasks::InputSpec& d : in.draws)
        draws.push_back({{"dtype", std::string(tasks::dtype_name(d.dtype))},
                         {"shape", task.shape_of(d, configs[c])},
                         {"init", init_json(d.init, d.dtype, configs[c])}});
      ins.back()["draws"] = draws;
    }
    config_list.push_back(
        {{"dims", configs[c]}, {"timed", c + 1 == configs.size()}, {"inputs", ins}});
  }
  json dims = json::array();
  for (const auto& [d, v] : task.dims) dims.push_back(d);
  return {{"op", op.op},
          {"task", task.id()},
          {"task_version", version},
          {"summary", task.summary},
          {"inputs", inputs},
          {"outputs", outputs},
          {"dims", dims},
          {"allow_tf32", task.allow_tf32},
          {"reference", task.reference},
          {"reference_torchscript",
           tasks::prelude_source() +
               tasks::rewrite_functional(task.reference, task.file.string(), std::nullopt)},
          {"configurations", config_list},
          {"fallback", op.fallback}};
}

Op make_op(const Winner& w, const std::string& name, const ExportOptions& o,
           compile::Compiler& compiler) {
  Op op;
  op.op = name;
  op.task = task_of(
      w, o.tasks_dir.empty() ? tasks::default_tasks_root() : std::filesystem::path(o.tasks_dir));
  const tasks::Task& task = *op.task;
  tasks::Reference ref = tasks::Reference::compile(task);
  op.tensors = compile::task_tensors(task, ref);
  op.output_shapes = tasks::fit_output_shapes(task, ref);
  op.plan = compile::parse_plan_text(w.plan, task, op.tensors);
  for (const auto& [k, v] : w.tunables.items()) op.tunables[k] = v.get<int64_t>();
  json not_built = json::array();  // architectures the kernel does not compile for (another may)
  for (const std::string& arch : o.archs) {
    compile::CandidateReport r =
        compile::check_candidate(task, op.tensors, w.source, w.plan, op.tunables,
                                 compile::DeviceFacts::for_arch(arch), compiler);
    if (!r.ok()) {
      not_built.push_back(
          {{"arch", arch},
           {"why", r.errors.empty() ? std::string("no reason given") : join(r.errors, "\n")}});
      continue;
    }
    if (op.kernels.empty()) op.kernels = r.kernels;
    op.images.push_back({arch, sm_of(arch), false, r.module.cubin});
    std::string ptx_arch = "compute_" + arch.substr(3);
    op.images.push_back({ptx_arch, sm_of(arch), true, r.module.ptx + std::string(1, '\0')});
  }
  if (op.images.empty())
    throw Error("it compiles for none of " + join(o.archs, ", ") + ": " +
                not_built[0]["why"].get<std::string>());
  op.manifest = task_entry(op, w.version);
  op.manifest["candidate"] = {{"id", w.candidate},
                              {"identity", w.identity},
                              {"model", w.model},
                              {"prompt_kind", w.prompt_kind},
                              {"run", w.evaluation["run"]},
                              {"generation", w.evaluation["generation"]},
                              {"admitted", w.evaluation["admitted"]}};
  op.manifest["tunables"] = w.tunables;
  op.manifest["judged"] = w.evaluation;
  op.manifest["not_built"] = not_built;
  check_generated_names(op);
  return op;
}

// --fallback: an op without a kernel, for a task with no winner: its PyTorch op runs the reference.
Op fallback_op(const std::string& task_id, const std::string& name, const ExportOptions& o) {
  Op op;
  op.op = name;
  op.fallback = true;
  std::filesystem::path root =
      o.tasks_dir.empty() ? tasks::default_tasks_root() : std::filesystem::path(o.tasks_dir);
  op.task = std::make_shared<const tasks::Task>(
      tasks::load_task(tasks::resolve_tasks(task_id, root).at(0)));
  tasks::Reference ref = tasks::Reference::compile(*op.task);
  op.tensors = compile::task_tensors(*op.task, ref);
  try {
    op.output_shapes = tasks::fit_output_shapes(*op.task, ref);
  } catch (const std::exception&) {
    op.output_shapes.clear();  // the reference makes them; the manifest says null
  }
  op.manifest = task_entry(op, op.task->content_hash);
  op.manifest["candidate"] = nullptr;
  op.manifest["judged"] = nullptr;
  op.manifest["tunables"] = json::object();
  check_generated_names(op);
  return op;
}

}  // namespace

ExportResult export_library(const ExportOptions& o, compile::Compiler& compiler,
                            const std::function<void(const std::string&)>& say) {
  if (o.out.empty()) throw UsageError("kforge export: --out DIR is required");
  for (const std::string& a : o.archs)
    if (sm_of(a) == 0)
      throw UsageError("kforge export: --arch " + a +
                       " is not an architecture (e.g. sm_90a, sm_80)");
  // POSIX calls, not std::filesystem's: PyTorch's wheels export an older libstdc++'s copies of
  // temp_directory_path, create_directories and remove_all, which crash (docs/decisions.md).
  std::filesystem::path scratch = make_temp_directory("kforge-export");
  struct RemoveAtEnd {
    std::string path;
    ~RemoveAtEnd() { remove_tree(path); }
  } remove_scratch{scratch.string()};
  std::optional<archive::Archive> ar;
  if (!o.from_jsonl.empty()) {
    ar = archive::Archive::open((scratch / "import.db").string(), true);
    std::ifstream in(o.from_jsonl, std::ios::binary);
    if (!in) throw UsageError("kforge export: --from " + o.from_jsonl + ": cannot read the file");
    archive::ImportOptions io;
    io.trust = true;
    ar->import_jsonl(in, o.from_jsonl, io);
  } else {
    ar = archive::Archive::open_read_only(archive::database_path(o.db).string());
  }
  ExportResult result;
  std::vector<Winner> ws = winners(*ar, o, result.missing);
  // A suite's tasks the archive has never seen are missing too.
  std::filesystem::path root =
      o.tasks_dir.empty() ? tasks::default_tasks_root() : std::filesystem::path(o.tasks_dir);
  for (const std::string& suite : o.suites) {
    if (!std::filesystem::is_directory(root / suite)) continue;
    for (const std::filesystem::path& f : tasks::resolve_tasks(suite, root)) {
      std::string id = suite + "/" + f.stem().string();
      bool known =
          std::any_of(ws.begin(), ws.end(), [&](const Winner& w) { return w.task == id; }) ||
          std::any_of(result.missing.begin(), result.missing.end(),
                      [&](const Missing& m) { return m.task == id; });
      if (!known) result.missing.push_back({id, "the archive holds no kernel for it"});
    }
  }
  for (const Winner& w : ws) {
    if (o.min_speedup) {  // the fastest correct kernel, but not fast enough to be worth shipping
      const json speedup =
          w.evaluation["speedup"].value(std::string(to_string(BaselineKind::Eager)), json());
      if (!speedup.is_number() || speedup.get<double>() < *o.min_speedup) {
        char why[160];
        if (speedup.is_number())
          std::snprintf(why, sizeof why,
                        "its fastest kernel is %.2fx eager, below --min-speedup %g",
                        speedup.get<double>(), *o.min_speedup);
        else
          std::snprintf(why, sizeof why,
                        "its fastest kernel has no speedup over eager recorded (--min-speedup %g)",
                        *o.min_speedup);
        result.missing.push_back({w.task, why});
        continue;
      }
    }
    try {
      result.ops.push_back(make_op(w, op_name(w.task, ws), o, compiler));
      if (say)
        say("  " + w.task + ": candidate " + std::to_string(w.candidate) + " (" +
            w.identity.substr(0, 12) + ")");
    } catch (const std::exception& e) {
      result.missing.push_back({w.task, std::string("its winner cannot be exported: ") + e.what()});
    }
  }
  if (o.fallback) {  // a task with no winner: an op that runs its reference, said so in the
                     // manifest
    std::vector<Missing> still;
    for (const Missing& m : result.missing) {
      bool no_winner = m.why.rfind("its winner cannot be exported", 0) != 0 &&
                       m.why != "the archive has no task of that name";
      std::string name = m.task.substr(m.task.find('/') + 1);
      for (const Op& op : result.ops)
        if (op.op == name) name = m.task;
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      try {
        if (!no_winner) throw Error(m.why);
        result.ops.push_back(fallback_op(m.task, name, o));
        if (say)
          say("  " + m.task + ": no kernel (" + m.why +
              "): the op runs the reference (--fallback)");
      } catch (const std::exception&) {
        still.push_back(m);
      }
    }
    result.missing = still;
  }
  if (!result.ops.empty()) write_package(o, result);  // nothing to export: no empty package
  return result;
}

}  // namespace kforge::exporter
