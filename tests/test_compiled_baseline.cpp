// torch.compile's baseline on the CPU (issue 20): where it cannot exist the reason is clear, the
// helper that builds packages names what is missing, and every shipped task's reference runs as
// the Python that torch.compile takes. Building, loading and timing a package: tests/gpu/.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "kforge/common/error.h"
#include "kforge/common/files.h"
#include "kforge/common/strings.h"
#include "kforge/tasks/task.h"
#include "kforge/verify/compiled_reference.h"
#include "test_util.h"

namespace {

using namespace kforge;
using kforge::test::TempDir;
using nlohmann::json;

const std::string kHelper =
    (kforge::test::source_dir() / "verify/inductor/kforge_inductor.py").string();
const std::string kDebianPython = "/usr/bin/python3";  // python3-torch: Debian's PyTorch

std::shared_ptr<tasks::Task> task(const std::string& spec) {
  auto files = tasks::resolve_tasks(spec, kforge::test::source_dir() / "tasks");
  return std::make_shared<tasks::Task>(tasks::load_task(files.at(0)));
}

// The helper's spec for `t` at dims `d`.
json spec_of(const tasks::Task& t, const tasks::Dims& d, const std::string& expect_torch) {
  json inputs = json::array();
  for (const auto& in : t.inputs)
    inputs.push_back({{"name", in.name},
                      {"shape", t.shape_of(in, d)},
                      {"dtype", std::string(tasks::dtype_name(in.dtype))}});
  return {{"task", t.id()},
          {"source", t.reference},
          {"inputs", inputs},
          {"allow_tf32", t.allow_tf32},
          {"device", 0},
          {"out", "/nonexistent/x.pt2"},
          {"expect_torch", expect_torch}};
}

// The helper run as `python_args` on `mode` and a spec file: its JSON lines.
std::vector<json> run_helper(const std::string& python_args, const std::string& mode,
                             const json& spec) {
  TempDir dir;
  std::string file = dir.write("spec.json", spec.dump()).string();
  std::string cmd = python_args + " " + kHelper + " " + mode + " " + file + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  std::vector<json> lines;
  for (const std::string& line : split(out, '\n'))
    if (!line.empty()) lines.push_back(json::parse(line));
  return lines;
}

// Debian's Python has PyTorch here (CI installs python3-torch); its version.
std::string debian_torch() {
  FILE* p = ::popen(
      (kDebianPython + " -c 'import torch; print(torch.__version__.split(\"+\")[0])' 2>/dev/null")
          .c_str(),
      "r");
  char buf[256] = {0};
  std::string v = std::fgets(buf, sizeof buf, p) ? std::string(buf) : "";
  ::pclose(p);
  while (!v.empty() && v.back() == '\n') v.pop_back();
  return v;
}

TEST(CompiledBaseline, ALibTorchThatCannotLoadPackagesSaysSo) {
  std::string why = verify::compiled_unsupported();
  if (why.empty()) GTEST_SKIP() << "this LibTorch (" TORCH_VERSION ") loads AOTInductor packages";
  EXPECT_NE(why.find("LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." +
                     std::to_string(TORCH_VERSION_MINOR)),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("cannot load AOTInductor packages (PyTorch 2.6 or later can)"),
            std::string::npos)
      << why;
  auto t = task("smoke/relu");
  for (BaselineKind kind : verify::compiled_kinds()) {
    verify::CompiledPackage p = verify::compiled_package(*t, {torch::zeros({8})}, 0, kind);
    EXPECT_TRUE(p.path.empty());
    EXPECT_EQ(p.kind, kind);
    EXPECT_EQ(p.absent, why);
  }
}

// The compiled kinds are torch.compile's two modes; eager and scripted are no package.
TEST(CompiledBaseline, EachCompiledKindIsAModeAndMaxAutotuneCanBeTurnedOff) {
  EXPECT_EQ(verify::compiled_kinds(),
            (std::vector<BaselineKind>{BaselineKind::Compiled, BaselineKind::CompiledMaxAutotune}));
  EXPECT_EQ(verify::compiled_mode(BaselineKind::Compiled), "default");
  EXPECT_EQ(verify::compiled_mode(BaselineKind::CompiledMaxAutotune), "max-autotune");
  EXPECT_FALSE(verify::compiled_mode(BaselineKind::Eager));
  auto t = task("smoke/relu");
  EXPECT_THROW(verify::compiled_package(*t, {torch::zeros({8})}, 0, BaselineKind::Scripted), Error);
  verify::CompiledOptions o;
  o.max_autotune = false;
  verify::CompiledPackage p =
      verify::compiled_package(*t, {torch::zeros({8})}, 0, BaselineKind::CompiledMaxAutotune, o);
  EXPECT_TRUE(p.path.empty());
  EXPECT_EQ(p.absent, "max-autotune turned off");
  o.max_autotune_off_reason = "turned off (--no-max-autotune)";
  EXPECT_EQ(
      verify::compiled_package(*t, {torch::zeros({8})}, 0, BaselineKind::CompiledMaxAutotune, o)
          .absent,
      "turned off (--no-max-autotune)");
  o.enabled = false;  // every kind off: the general reason
  EXPECT_EQ(
      verify::compiled_package(*t, {torch::zeros({8})}, 0, BaselineKind::CompiledMaxAutotune, o)
          .absent,
      "turned off");
}

// The packages built ahead for a run (compiled_packages): one per task and compiled kind, in the
// tasks' order, each with its reason where it cannot be built, and `done` told of each once.
TEST(CompiledBaseline, PackagesAheadOfARunComeBackPerTaskWithTheirReasons) {
  std::vector<std::shared_ptr<tasks::Task>> owned = {task("smoke/relu"), task("smoke/softmax"),
                                                     task("level1/matmul_square"),
                                                     task("smoke/vector_add")};
  std::vector<const tasks::Task*> ts;
  for (const auto& t : owned) ts.push_back(t.get());
  verify::CompiledOptions off;
  off.enabled = false;
  off.off_reason = "turned off (--no-compile)";
  off.build_jobs = 3;
  const std::vector<BaselineKind> kinds = verify::compiled_kinds();
  std::vector<std::string> heard;
  std::vector<verify::CompiledPackage> p = verify::compiled_packages(
      ts, 0, off, [&](const tasks::Task& t, const verify::CompiledPackage& c) {
        heard.push_back(t.id() + " " + std::string(to_string(c.kind)));
        EXPECT_EQ(c.absent, "turned off (--no-compile)");
      });
  ASSERT_EQ(p.size(), ts.size() * kinds.size());
  for (size_t k = 0; k < p.size(); ++k) {
    EXPECT_EQ(p[k].kind, kinds[k % kinds.size()]);
    EXPECT_EQ(p[k].absent, "turned off (--no-compile)");
  }
  std::sort(heard.begin(), heard.end());
  EXPECT_EQ(heard,
            (std::vector<std::string>{
                "level1/matmul_square compiled", "level1/matmul_square compiled_max_autotune",
                "smoke/relu compiled", "smoke/relu compiled_max_autotune", "smoke/softmax compiled",
                "smoke/softmax compiled_max_autotune", "smoke/vector_add compiled",
                "smoke/vector_add compiled_max_autotune"}));

  std::string why = verify::compiled_unsupported();
  if (why.empty())
    GTEST_SKIP() << "this LibTorch loads packages: building them needs a GPU (tests/gpu/)";
  p = verify::compiled_packages(ts, 0);  // even level1/matmul_square's timed dims take no memory
  ASSERT_EQ(p.size(), ts.size() * kinds.size());
  for (const verify::CompiledPackage& c : p) {
    EXPECT_TRUE(c.path.empty());
    EXPECT_EQ(c.absent, why);
  }
}

// Once a stop is requested (Ctrl-C in `kforge evolve`) no build starts: every package not yet
// built is absent with the interruption's reason, and `done` still hears of each. (The builds under
// way are killed: tests/gpu/test_compiled_baseline.cpp, where packages can be built.)
TEST(CompiledBaseline, NoBuildStartsOnceAStopIsRequested) {
  std::vector<std::shared_ptr<tasks::Task>> owned = {task("smoke/relu"), task("smoke/softmax")};
  std::vector<const tasks::Task*> ts = {owned[0].get(), owned[1].get()};
  verify::CompiledOptions o;
  o.build_jobs = 2;
  std::atomic<int> asked{0};  // polled from the building threads
  o.stop = [&asked] { return ++asked > 0; };
  size_t heard = 0;
  std::vector<verify::CompiledPackage> p = verify::compiled_packages(
      ts, 0, o, [&](const tasks::Task&, const verify::CompiledPackage& c) {
        ++heard;
        EXPECT_EQ(c.absent, verify::kCompiledInterrupted);
      });
  ASSERT_EQ(p.size(), ts.size() * verify::compiled_kinds().size());
  for (const verify::CompiledPackage& c : p) {
    EXPECT_TRUE(c.path.empty());
    EXPECT_EQ(c.absent, verify::kCompiledInterrupted);
  }
  EXPECT_EQ(heard, p.size());
  EXPECT_GE(asked.load(), static_cast<int>(p.size()));
}

TEST(CompiledBaseline, TheHelperNamesWhatIsMissing) {
  std::string version = debian_torch();
  if (version.empty())
    GTEST_SKIP() << kDebianPython << " has no PyTorch (apt install python3-torch)";
  auto t = task("smoke/relu");
  json spec = spec_of(*t, t->check_dims.at(0), version);
  auto reason = [](const std::vector<json>& lines) {
    EXPECT_EQ(lines.size(), 1u);
    EXPECT_FALSE(lines.empty() || lines[0].value("ok", true));
    return lines.empty() ? std::string() : lines[0].value("reason", "");
  };
  // No PyTorch (-S: without site-packages).
  EXPECT_NE(reason(run_helper(kDebianPython + " -S", "build", spec)).find("has no PyTorch"),
            std::string::npos);
  // Another PyTorch than kforge's LibTorch.
  spec["expect_torch"] = "99.1.0";
  EXPECT_NE(reason(run_helper(kDebianPython, "build", spec))
                .find("has PyTorch " + version +
                      " but kforge's LibTorch is 99.1.0: an AOTInductor package is "
                      "loaded by the PyTorch version that built it"),
            std::string::npos);
  // A reference that is not Python.
  spec["expect_torch"] = version;
  spec["source"] = "def forward(x: Tensor) -> Tensor:\n    return torch.relu(x\n";
  EXPECT_NE(reason(run_helper(kDebianPython, "build", spec))
                .find("the reference does not run as Python: SyntaxError"),
            std::string::npos);
  // The task's own, on a machine without a GPU.
  spec["source"] = t->reference;
  EXPECT_NE(reason(run_helper(kDebianPython, "build", spec)).find("sees no CUDA GPU"),
            std::string::npos);
}

// max-autotune's package is built with torch.compile(mode="max-autotune")'s options less CUDA
// graphs (AOTInductor has none), or with the options max-autotune always set where PyTorch cannot
// list them; the default mode's with none. The helper's function, given a stand-in for torch.
TEST(CompiledBaseline, MaxAutotunesOptionsAreTorchCompilesLessCudaGraphs) {
  if (::access(kDebianPython.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << kDebianPython;
  TempDir dir;
  std::string script = dir.write("options.py", R"(import importlib.util, json, sys, types
spec = importlib.util.spec_from_file_location("helper", sys.argv[1])
helper = importlib.util.module_from_spec(spec)
spec.loader.exec_module(helper)
def list_mode_options(mode=None, dynamic=None):
    return {"max-autotune": {"max_autotune": True, "triton.cudagraphs": True,
                             "coordinate_descent_tuning": True}}[mode]
new = types.SimpleNamespace(_inductor=types.SimpleNamespace(list_mode_options=list_mode_options))
old = types.SimpleNamespace(_inductor=types.SimpleNamespace())
print(json.dumps({"default": helper.inductor_configs(new, "default"),
                  "max-autotune": helper.inductor_configs(new, "max-autotune"),
                  "older": helper.inductor_configs(old, "max-autotune")}))
)")
                           .string();
  FILE* p = ::popen((kDebianPython + " " + script + " " + kHelper + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ::pclose(p);
  json j = json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["default"], json::object());
  json tuned = {{"max_autotune", true}, {"coordinate_descent_tuning", true}};
  EXPECT_EQ(j["max-autotune"], tuned);
  EXPECT_EQ(j["older"], tuned);
}

// torch.compile takes Python: each shipped reference, run as Python by the helper (Debian's
// PyTorch, the CPU) at its task's first check dims, defines forward() and runs. Only a PyTorch
// older than 2.4 may lack a function (F.rms_norm came in 2.4, F.scaled_dot_product_attention
// in 2.0).
TEST(CompiledBaseline, EveryShippedReferenceRunsAsPython) {
  std::string version = debian_torch();
  if (version.empty())
    GTEST_SKIP() << kDebianPython << " has no PyTorch (apt install python3-torch)";
  int major = std::stoi(version), minor = std::stoi(version.substr(version.find('.') + 1));
  bool old = major < 2 || (major == 2 && minor < 4);
  json specs = json::array();
  for (const std::string suite : {"smoke", "level1", "level2"})
    for (const auto& file : tasks::resolve_tasks(suite, kforge::test::source_dir() / "tasks")) {
      tasks::Task t = tasks::load_task(file);
      specs.push_back(spec_of(t, t.check_dims.at(0), ""));
    }
  std::vector<json> lines = run_helper(kDebianPython, "check", specs);
  ASSERT_EQ(lines.size(), specs.size());
  int ok = 0, newer = 0;
  for (const json& l : lines) {
    bool lacks = old && l.value("newer", false) &&
                 l.value("reason", "").find("module 'torch.nn.functional' has no attribute") !=
                     std::string::npos;
    EXPECT_TRUE(l.value("ok", false) || lacks)
        << l.value("task", "") << ": " << l.value("reason", "");
    ok += l.value("ok", false);
    newer += lacks;
  }
  std::printf(
      "[ python ] %d of %zu shipped references run as Python with PyTorch %s; %d need a newer "
      "one\n",
      ok, lines.size(), version.c_str(), newer);
}

}  // namespace
