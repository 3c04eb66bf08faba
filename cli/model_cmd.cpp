// `kforge model profile MODEL.py` (docs/model.md): a user's model (KernelBench's convention) cut
// into the chains of operations a kernel could fuse, ranked by their share of the model's GPU time
// (by FLOPs where there is no GPU), and with --suite the top chains written as KernelBench problems
// and imported as a kforge suite, ready for `kforge evolve`.
//
// The model's code runs in kforge's confined Python helper (the KernelBench import's), whose
// result is read here field by field: the model's code could have written it.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "command_list.h"
#include "commands.h"
#include "json_output.h"
#include "kforge/common/error.h"
#include "kforge/common/files.h"
#include "kforge/tasks/kernelbench_import.h"
#include "kforge/tasks/reference_child.h"
#include "kforge/tasks/task.h"
#include "kforge/verify/driver.h"
#include "table.h"
#include "tasks_check.h"

namespace kforge::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kDefaultModelSeconds = 900;  // a model's trace, the chains' problems and a profile
constexpr size_t kMaxChains = 10000;

// What both subcommands take.
struct ModelArgs {
  std::string file;
  std::string device;  // "": cuda where kforge can use a GPU, else cpu
  std::string python;
  double time_limit = kDefaultModelSeconds;
  bool json = false;
};

struct ProfileArgs : ModelArgs {
  std::string suite, tasks_dir;
  int top = 5;
};

// One chain of the profile, as read from the helper's result.
struct Chain {
  int64_t index = 0;
  std::string name, what, problem, why_not;
  int64_t ops = 0;
  double flops = 0, bytes = 0;
  std::optional<double> gpu_ms;
  std::string inputs;  // "x[16, 512, 768], ..." for the table
};

double number(const json& j, const char* key, double otherwise = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() && std::isfinite(it->get<double>()) ? it->get<double>()
                                                                              : otherwise;
}

std::string string_of(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string shape_text(const json& shape) {
  std::string s = "[";
  if (shape.is_array())
    for (const json& d : shape) {
      if (s.size() > 1) s += ", ";
      s += d.is_number_integer() ? std::to_string(d.get<int64_t>()) : "?";
    }
  return s + "]";
}

// A chain's name as kforge lets it become a file and task name: lower-case letters, digits and _.
std::string safe_name(const std::string& name, int64_t index) {
  std::string out;
  for (char c : name.substr(0, 64)) {
    unsigned char u = static_cast<unsigned char>(c);
    out += std::isalnum(u) ? static_cast<char>(std::tolower(u)) : '_';
  }
  if (out.empty() || !std::isalpha(static_cast<unsigned char>(out[0])))
    out = "chain" + std::to_string(index) + (out.empty() ? "" : "_" + out);
  return out;
}

std::vector<Chain> read_chains(const json& profile) {
  std::vector<Chain> out;
  const json& chains = profile.contains("chains") ? profile["chains"] : json();
  if (!chains.is_array()) return out;
  for (const json& c : chains) {
    if (!c.is_object() || out.size() >= kMaxChains) continue;
    Chain x;
    x.index = static_cast<int64_t>(number(c, "index", static_cast<double>(out.size() + 1)));
    x.name = safe_name(string_of(c, "name"), x.index);
    x.what = string_of(c, "what");
    x.problem = string_of(c, "problem");
    x.why_not = string_of(c, "why_not");
    x.ops = static_cast<int64_t>(number(c, "ops"));
    x.flops = number(c, "flops");
    x.bytes = number(c, "bytes");
    if (c.contains("gpu_ms") && c["gpu_ms"].is_number()) x.gpu_ms = number(c, "gpu_ms");
    if (c.contains("inputs") && c["inputs"].is_array())
      for (const json& in : c["inputs"]) {
        if (!in.is_object()) continue;
        if (!x.inputs.empty()) x.inputs += ", ";
        x.inputs += string_of(in, "name") + shape_text(in.contains("shape") ? in["shape"] : json());
      }
    if (x.problem.empty() && x.why_not.empty()) x.why_not = "kforge did not write it";
    out.push_back(std::move(x));
  }
  return out;
}

// The helper's progress is the command's own to print: nothing here.
struct QuietObserver : tasks::KernelBenchObserver {
  void on_start(size_t, const std::string&, const std::string&, const std::string&) override {}
  void on_converted(const tasks::KernelBenchProblem&,
                    const tasks::KernelBenchConversion&) override {}
  void on_failed(const tasks::KernelBenchProblem&) override {}
  void on_removed_stale(const std::string&) override {}
};

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_folder(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Runs the model file through kforge's confined Python helper in `o.mode` ("profile", "check"):
// its result, an object the caller reads field by field. A model the helper cannot run is the
// user's input error, naming the file and why.
json run_model_helper(tasks::KernelBenchOptions o, const std::string& file,
                      const std::string& verb) {
  o.paths = {file};
  o.suite = "model";  // the helper writes no task in these modes
  o.command = "kforge model " + o.mode;
  QuietObserver quiet;
  tasks::KernelBenchImport r = tasks::import_kernelbench(o, quiet);
  if (r.results.empty()) {
    std::string why = r.problems.empty() ? std::string("no result") : r.problems[0].reason;
    // The file's convention is the fix only where the file lacks it; a model that fails says where.
    bool not_a_model = why.find("not a KernelBench problem") != std::string::npos;
    throw InputError(file, std::nullopt, "",
                     "kforge cannot " + verb + " this model: " + why +
                         (not_a_model ? " (a model file defines class Model, get_inputs() and "
                                        "get_init_inputs(), as KernelBench's problems do: "
                                        "docs/model.md)"
                                      : ""));
  }
  json result = json::parse(r.results[0], nullptr, false);
  if (!result.is_object()) throw Error("kforge's model helper sent no object (a kforge bug)");
  return result;
}

std::string percent_text(double share) {
  return fixed(100 * share, 1) + "%";
}

// The end-to-end speedup if a part taking `share` of the time ran twice as fast (Amdahl).
double if_twice_as_fast(double share) {
  return 1 / (1 - share / 2);
}

// The helper's options for `mode` from what both subcommands take, checked; the device chosen.
tasks::KernelBenchOptions model_options(const ModelArgs& a, const std::string& mode) {
  if (!is_file(a.file)) throw InputError(a.file, std::nullopt, "", "no such model file");
  if (!a.device.empty() && a.device != "cpu" && a.device != "cuda")
    throw InputError("--device", std::nullopt, "", "must be cpu or cuda, got '" + a.device + "'");
  if (!(a.time_limit > 0 && a.time_limit <= tasks::kMaxReferenceSeconds))
    throw InputError("--time-limit", std::nullopt, "",
                     "must be a number of seconds above 0 and at most 86400");
  tasks::KernelBenchOptions o;
  o.device = a.device;
  if (o.device.empty()) o.device = verify::Driver::get().available() ? "cuda" : "cpu";
  o.python = a.python;
  o.time_limit = a.time_limit;
  o.mode = mode;
  return o;
}

int run_profile(const ProfileArgs& a, const fs::path& tasks_root) {
  tasks::KernelBenchOptions o = model_options(a, "profile");
  const std::string& device = o.device;
  if (a.top < 1) throw InputError("--top", std::nullopt, "", "must be at least 1");
  if (!a.suite.empty() && !std::all_of(a.suite.begin(), a.suite.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      }))
    throw InputError("--suite", std::nullopt, "",
                     "must be a folder name of letters, digits, _ and -, got '" + a.suite + "'");
  if (device == "cuda") verify::Driver::get().require("kforge model profile --device cuda");
  StdoutToStderr redirect(a.json);
  std::cout << "profiling " << a.file << " (it runs the file's code, confined; on " << device << ")"
            << std::endl;
  json profile = run_model_helper(o, a.file, "profile");
  std::vector<Chain> chains = read_chains(profile);
  const json model =
      profile.contains("model") && profile["model"].is_object() ? profile["model"] : json::object();
  bool timed = profile.contains("traced_gpu_ms") && profile["traced_gpu_ms"].is_number();
  double total = number(profile, "traced_gpu_ms");
  double total_flops = 0;
  for (const Chain& c : chains) total_flops += c.flops;
  std::stable_sort(chains.begin(), chains.end(), [timed](const Chain& x, const Chain& y) {
    return timed ? x.gpu_ms.value_or(0) > y.gpu_ms.value_or(0) : x.flops > y.flops;
  });

  std::string inputs;
  if (model.contains("inputs") && model["inputs"].is_array())
    for (const json& in : model["inputs"])
      if (in.is_object())
        inputs += (inputs.empty() ? "" : ", ") + string_of(in, "name") + " " +
                  string_of(in, "dtype") + shape_text(in.contains("shape") ? in["shape"] : json());
  std::string summary = string_of(model, "summary");
  std::cout << "model   " << a.file << (summary.empty() ? "" : ": " + summary) << "\n"
            << "inputs  " << inputs << "; " << static_cast<int64_t>(number(profile, "nodes"))
            << " operations in " << chains.size() << " chains\n";
  if (timed)
    std::cout << "GPU     " << string_of(profile, "gpu") << ": the model's forward "
              << fixed(number(profile, "forward_ms"), 3)
              << " ms (median of 20, CUDA events); its traced graph's kernels " << fixed(total, 3)
              << " ms, " << fixed(number(profile, "other_gpu_ms"), 3)
              << " ms of it outside the chains (torch.profiler, mean of 3 forwards)\n";
  else
    std::cout << "GPU     none used (" << (device == "cpu" ? "--device cpu" : device)
              << "): the chains are ranked by FLOPs, without times; on a GPU, `kforge model "
                 "profile` times each chain\n";
  Table t({"#", "chain", "operations", "ops", "GFLOP", "MB moved", "GPU ms", "share", "if 2x",
           "inputs"});
  for (const Chain& c : chains) {
    double share = timed && total > 0 ? c.gpu_ms.value_or(0) / total : -1;
    t.add({std::to_string(c.index), c.name, c.what, std::to_string(c.ops), fixed(c.flops / 1e9, 2),
           fixed(c.bytes / 1e6, 1), c.gpu_ms ? fixed(*c.gpu_ms, 3) : "-",
           share >= 0 ? percent_text(share) : "-",
           share >= 0 ? fixed(if_twice_as_fast(share), 2) + "x" : "-", c.inputs});
  }
  t.print();
  std::cout << "(if 2x: the model's speedup were that chain twice as fast, all else equal; "
            << fixed(total_flops / 1e9, 1) << " GFLOP in all)\n";
  if (profile.contains("notes") && profile["notes"].is_array())
    for (const json& n : profile["notes"])
      if (n.is_string()) std::cout << "note: " << n.get<std::string>() << "\n";

  json written = json::array();
  int rc = kExitOk;
  if (!a.suite.empty()) {
    std::vector<const Chain*> top;
    for (const Chain& c : chains) {
      if (static_cast<int>(top.size()) >= a.top) break;
      if (!c.problem.empty()) top.push_back(&c);
    }
    for (size_t i = 0; i < chains.size() && i < static_cast<size_t>(a.top); ++i)
      if (chains[i].problem.empty())
        std::cout << "not written: chain " << chains[i].index << " (" << chains[i].name
                  << "): " << chains[i].why_not << "\n";
    std::string root = a.tasks_dir.empty() ? tasks_root.string() : a.tasks_dir;
    std::string problems = root + "/" + a.suite + "/model";
    make_directories(problems);
    KernelBenchImportArgs import;
    import.o.suite = a.suite;
    import.o.device = device;
    import.o.python = a.python;
    import.out = root;
    for (const Chain* c : top) {
      std::string f = problems + "/" + c->name + ".py";
      write_file_atomic(f, c->problem);
      import.o.paths.push_back(f);
      written.push_back(f);
    }
    std::cout << "\nthe top " << top.size() << " chain(s) as KernelBench problems in " << problems
              << ", imported as the suite " << a.suite << ":\n";
    rc = run_kernelbench_import(import, tasks_root);
  }
  if (a.json) {
    profile["problems_written"] = written;
    redirect.print(profile);
  }
  return rc;
}

struct CheckModelArgs : ModelArgs {
  std::string package;
  int runs = 50;
  bool reference_ops = false, max_autotune = false;
};

// The package's PyTorch library, built: pip's place (python/NS/_C*.so) or CMake's build folder.
// (POSIX calls, not std::filesystem's: see tests/test_util.h, TempDir.)
std::string package_library(const std::string& dir, const std::string& name) {
  for (const std::string& place : {dir + "/python/" + name, dir + "/build", dir + "/build/lib"}) {
    DIR* d = ::opendir(place.c_str());
    if (!d) continue;
    std::string found;
    while (dirent* e = ::readdir(d)) {
      std::string f = e->d_name;
      if ((f.rfind("_C", 0) == 0 && f.find(".so") != std::string::npos) ||
          f == "lib" + name + "_torch.so")
        found = place + "/" + f;
    }
    ::closedir(d);
    if (!found.empty()) return found;
  }
  return "";
}

// The manifest's ops as the helper needs them, each field checked (the file is the user's).
json package_for_helper(const std::string& manifest_file, json& manifest) {
  std::optional<std::string> text = read_file(manifest_file);
  if (!text)
    throw InputError(manifest_file, std::nullopt, "",
                     "no manifest.json: --package names a folder `kforge export` wrote");
  manifest = json::parse(*text, nullptr, false);
  if (!manifest.is_object() || !manifest.contains("name") || !manifest["name"].is_string() ||
      !manifest.contains("ops") || !manifest["ops"].is_array())
    throw InputError(manifest_file, std::nullopt, "name, ops",
                     "not a kforge export manifest (an object with a name and ops)");
  json ops = json::array();
  for (size_t i = 0; i < manifest["ops"].size(); ++i) {
    const json& op = manifest["ops"][i];
    std::string where = "ops[" + std::to_string(i) + "]";
    auto need = [&](const char* key, bool ok) {
      if (!ok)
        throw InputError(manifest_file, std::nullopt, where + "." + key,
                         "missing or of the wrong type");
    };
    need("op", op.contains("op") && op["op"].is_string());
    need("task", op.contains("task") && op["task"].is_string());
    need("inputs", op.contains("inputs") && op["inputs"].is_array());
    need("reference_torchscript",
         op.contains("reference_torchscript") && op["reference_torchscript"].is_string());
    json inputs = json::array();
    for (const json& in : op["inputs"]) {
      need("inputs", in.is_object() && in.contains("name") && in["name"].is_string() &&
                         in.contains("shape") && in["shape"].is_array());
      inputs.push_back({{"name", in["name"]}, {"shape", in["shape"]}});
    }
    json configurations = json::array();
    if (op.contains("configurations") && op["configurations"].is_array())
      for (const json& c : op["configurations"])
        if (c.is_object() && c.contains("dims") && c["dims"].is_object())
          configurations.push_back({{"dims", c["dims"]}});
    json judged = op.contains("judged") && op["judged"].is_object() ? op["judged"] : json::object();
    ops.push_back(
        {{"op", op["op"]},
         {"task", op["task"]},
         {"inputs", inputs},
         {"dims", op.contains("dims") ? op["dims"] : json::array()},
         {"configurations", configurations},
         {"reference_torchscript", op["reference_torchscript"]},
         {"judged", {{"speedup", judged.contains("speedup") ? judged["speedup"] : json()}}},
         {"tolerance", op.contains("outputs") && op["outputs"].is_array() &&
                               !op["outputs"].empty() && op["outputs"][0].is_object() &&
                               op["outputs"][0].contains("tolerance")
                           ? op["outputs"][0]["tolerance"]
                           : json(1e-4)}});
  }
  return {{"name", manifest["name"]}, {"ops", ops}};
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string ms_text(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? fixed(j[key].get<double>(), 3) + " ms" : "-";
}

int run_model_check(const CheckModelArgs& a) {
  tasks::KernelBenchOptions o = model_options(a, "check");
  const std::string& device = o.device;
  if (!is_folder(a.package))
    throw InputError(
        "--package", std::nullopt, "",
        "'" + a.package + "' is not a folder (it names what `kforge export --out` wrote)");
  if (a.runs < 1 || a.runs > 10000)
    throw InputError("--runs", std::nullopt, "", "must be 1 to 10000");
  json manifest;
  json package = package_for_helper(a.package + "/manifest.json", manifest);
  std::string name = package["name"].get<std::string>();
  std::string library;
  if (!a.reference_ops) {
    library = package_library(a.package, name);
    if (library.empty())
      throw UsageError("kforge model check: the package's PyTorch ops are not built in " +
                       a.package + " (no python/" + name + "/_C*.so, no build/lib" + name +
                       "_torch.so): build them with `pip install --no-build-isolation " +
                       a.package + "` or `cmake -S " + a.package + " -B " + a.package +
                       "/build && cmake --build " + a.package +
                       "/build` (LibTorch with CUDA), or check the rewrite alone with "
                       "--reference-ops (each op's task reference in its place, no GPU needed)");
    package["library"] = real_path(library);
  }
  if (!a.reference_ops || device == "cuda")
    verify::Driver::get().require(a.reference_ops ? "kforge model check --device cuda"
                                                  : "kforge model check (the package's kernels)");
  package["runs"] = a.runs;
  package["compile_modes"] = a.max_autotune ? json({"default", "max-autotune"}) : json({"default"});
  StdoutToStderr redirect(a.json);

  o.package_json = package.dump();
  o.reads = {real_path(a.package)};
  std::cout << "checking " << a.file << " with " << name
            << "'s ops in place of its chains (it runs the file's code, confined; on " << device
            << ")" << std::endl;
  json result = run_model_helper(o, a.file, "check");
  const json rows =
      result.contains("rows") && result["rows"].is_array() ? result["rows"] : json::array();
  std::cout << "package " << a.package << " (" << name << ", " << package["ops"].size()
            << " op(s)); " << static_cast<int64_t>(number(result, "replaced")) << " of "
            << static_cast<int64_t>(number(result, "chains")) << " chains replaced"
            << (a.reference_ops ? " by each op's task reference (--reference-ops: the rewrite "
                                  "checked, not the kernels)"
                                : "")
            << "\n";
  Table t({"#", "chain", "op", "share", "alone x eager", "calls", "fell back", "why not"});
  double tolerance = 0;
  for (const json& row : rows) {
    if (!row.is_object()) continue;
    double share = number(row, "share", -1);
    const json& alone = row.contains("speedup_alone") && row["speedup_alone"].is_object()
                            ? row["speedup_alone"]
                            : json::object();
    t.add({std::to_string(static_cast<int64_t>(number(row, "index"))), string_of(row, "chain"),
           string_of(row, "op"), share >= 0 ? percent_text(share) : "-",
           alone.contains("eager") && alone["eager"].is_number()
               ? fixed(alone["eager"].get<double>(), 2) + "x"
               : "-",
           std::to_string(static_cast<int64_t>(number(row, "calls"))),
           std::to_string(static_cast<int64_t>(number(row, "fallbacks"))),
           string_of(row, "why_not")});
  }
  for (const json& op : package["ops"])
    if (op["tolerance"].is_number()) tolerance = std::max(tolerance, op["tolerance"].get<double>());
  t.print();
  bool have_error = result.contains("error") && result["error"].is_number();
  double error = number(result, "error"), own = number(result, "model_error");
  double limit = std::max(tolerance > 0 ? tolerance : 1e-4, 8 * own);
  bool correct = have_error ? error <= limit : number(result, "error_vs_model", 1) <= limit;
  std::cout << "correct " << (correct ? "yes" : "NO") << ": the model with the ops vs "
            << (have_error ? "the model in float64: " + sci(error) +
                                 " (max |err| / rms; the float32 model's own " + sci(own) + ")"
                           : "the float32 model: " + sci(number(result, "error_vs_model")))
            << "; limit " << sci(limit) << " (the ops' tolerance, or 8x the model's own error)\n";
  if (result.contains("eager_ms")) {
    double eager = number(result, "eager_ms"), ours = number(result, "kforge_ms");
    std::cout << "time    on " << string_of(result, "gpu") << ", median of "
              << static_cast<int64_t>(number(result, "runs")) << " forwards, L2 flushed: eager "
              << ms_text(result, "eager_ms") << ", with the ops " << ms_text(result, "kforge_ms")
              << " (" << fixed(ours > 0 ? eager / ours : 0, 2) << "x eager)";
    if (result.contains("compiled_ms") && result["compiled_ms"].is_object())
      for (const auto& [mode, v] : result["compiled_ms"].items())
        std::cout << "; torch.compile " << mode << " "
                  << (v.is_number() ? fixed(v.get<double>(), 3) + " ms (the ops " +
                                          fixed(ours > 0 ? v.get<double>() / ours : 0, 2) + "x it)"
                      : v.is_string() ? v.get<std::string>()
                                      : std::string("-"));
    std::cout << "\n";
  } else {
    std::cout << "time    none (" << device << "): on a GPU, kforge model check times the model "
              << "with and without the ops, and torch.compile\n";
  }
  if (a.json) {
    result["correct"] = correct;
    result["limit"] = limit;
    redirect.print(result);
  }
  return correct ? kExitOk : kExitFindings;
}

}  // namespace

void add_model_command(CLI::App& app, int& exit_code) {
  auto* model = app.add_subcommand("model", command_description("model"));
  model->require_subcommand(1);
  auto* profile = model->add_subcommand(
      "profile",
      "The chains of operations that take a model's time, ranked, with the end-to-end gain of "
      "each twice as fast; --suite writes the top ones as tasks");
  auto a = std::make_shared<ProfileArgs>();
  profile
      ->add_option("model", a->file,
                   "The model: a Python file with class Model, get_inputs() and "
                   "get_init_inputs() (KernelBench's convention)")
      ->required();
  profile->add_option("--device", a->device,
                      "cuda (times each chain) or cpu (the graph, chains and FLOPs only); default: "
                      "cuda where kforge can use a GPU");
  profile->add_option("--suite", a->suite,
                      "Write the top chains as KernelBench problems (SUITE/model/) and import them "
                      "as this suite");
  profile->add_option("--top", a->top, "How many chains --suite writes")->capture_default_str();
  profile->add_option("--tasks-dir", a->tasks_dir,
                      "Folder the suite goes in (default: the tasks folder)");
  profile->add_option("--python", a->python,
                      "Python with PyTorch (default: $KFORGE_PYTHON, else python3, then "
                      "/usr/bin/python3)");
  profile->add_option("--time-limit", a->time_limit, "Seconds the profile may take")
      ->capture_default_str();
  profile->add_flag("--json", a->json, "The profile as JSON on stdout; the table on stderr");
  add_wide_flag(profile);
  profile->footer(
      "Examples:\n  kforge model profile tests/models/transformer_block.py\n      the chains, "
      "ranked (timed on a GPU)\n  kforge model profile my_model.py --suite mine --top 3\n      "
      "the top three as the suite 'mine', for kforge evolve mine\n");
  profile->callback([&exit_code, a] { exit_code = run_profile(*a, tasks::default_tasks_root()); });

  auto* check = model->add_subcommand(
      "check",
      "The model with an exported package's ops in place of its chains: outputs compared, end to "
      "end time against eager and torch.compile");
  auto c = std::make_shared<CheckModelArgs>();
  check->add_option("model", c->file, "The model file (as for model profile)")->required();
  check->add_option("--package", c->package, "A folder `kforge export --out` wrote (its ops built)")
      ->required();
  check->add_flag("--reference-ops", c->reference_ops,
                  "Each op's task reference in its place (the rewrite checked without the kernels; "
                  "no GPU or build needed)");
  check->add_option("--device", c->device,
                    "cuda or cpu (with --reference-ops); default: cuda where kforge can use a GPU");
  check->add_option("--runs", c->runs, "Forwards timed per variant (the median is reported)")
      ->capture_default_str();
  check->add_flag("--max-autotune", c->max_autotune,
                  "Also time torch.compile's max-autotune mode (minutes to compile)");
  check->add_option("--python", c->python, "Python with PyTorch (as for model profile)");
  check->add_option("--time-limit", c->time_limit, "Seconds the check may take")
      ->capture_default_str();
  check->add_flag("--json", c->json, "The result as JSON on stdout; the table on stderr");
  add_wide_flag(check);
  check->footer(
      "Examples:\n  kforge model check my_model.py --package kernels\n      the model with the "
      "package's ops, checked and timed\n  kforge model check my_model.py --package kernels "
      "--reference-ops\n      the rewrite alone, on the CPU\n");
  check->callback([&exit_code, c] { exit_code = run_model_check(*c); });
}

}  // namespace kforge::cli
