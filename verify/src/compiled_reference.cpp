#include "kforge/verify/compiled_reference.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#if __has_include(<torch/csrc/inductor/aoti_package/model_package_loader.h>)
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#define KFORGE_HAS_AOTI 1
#else
#define KFORGE_HAS_AOTI 0
#endif

#include "inductor_helper.h"
#include "kforge/common/error.h"
#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/common/line_channel.h"
#include "kforge/common/paths.h"
#include "kforge/common/process.h"
#include "kforge/common/sandbox.h"
#include "kforge/common/strings.h"
#include "kforge/tasks/generator.h"
#include "kforge/verify/driver.h"

namespace kforge::verify {

using nlohmann::json;

namespace {

// LibTorch's version as PyTorch writes it ("2.11.0"): the helper's PyTorch must be the same.
std::string libtorch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

// The GPU kind a package is built for (Triton's kernels are compiled for it).
std::string gpu_kind(int device) {
  for (const DeviceInfo& d : list_devices())
    if (d.ordinal == device)
      return d.name + " sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor);
  throw Error("no CUDA device " + std::to_string(device));
}

// Runs the helper with `python` on `spec`: its JSON line, or nullopt when it printed none (its
// log then says why) or `stop` returned true while it ran (it is killed then).
std::optional<json> run_helper(const std::string& python, const std::string& script,
                               const std::string& spec, const std::string& log,
                               std::chrono::seconds timeout, const std::function<bool()>& stop) {
  // One compile thread per build: compiled_packages runs several builds at once, and each build's
  // own pool of compile workers (one per CPU, each importing PyTorch) costs more than it saves on a
  // task's few kernels. TORCHINDUCTOR_COMPILE_THREADS in kforge's environment overrides it.
  std::map<std::string, std::string> env = {{"PYTHONDONTWRITEBYTECODE", "1"},
                                            {"PYTHONUNBUFFERED", "1"},
                                            {"TORCHINDUCTOR_COMPILE_THREADS", "1"}};
  for (const char* name :
       {"PYTHONPATH", "PYTHONHOME", "PYENV_VERSION", "PYENV_ROOT", "VIRTUAL_ENV", "CONDA_PREFIX",
        "CUDA_HOME", "CUDA_VISIBLE_DEVICES", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
        "TORCHINDUCTOR_COMPILE_THREADS"})
    if (const char* v = std::getenv(name)) env[name] = v;
  UniqueFd log_fd(::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (log_fd.get() < 0) throw Error("cannot write " + log + ": " + std::strerror(errno));
  SpawnOptions o;
  o.env = child_environment(env);
  o.argv = {python, script, "build", spec};
  Pipe out = make_pipe();
  o.fds = {{out.write.get(), 1}, {log_fd.get(), 2}};
  Process p = Process::spawn(o);
  out.write.reset();
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char chunk[4096];
  for (;;) {
    auto now = std::chrono::steady_clock::now();
    if (now > deadline) break;
    Wait w =
        wait_readable(out.read.get(), std::min(deadline, now + std::chrono::milliseconds(250)));
    if (w == Wait::Timeout) {
      if (stop && stop()) {
        p.kill();
        return std::nullopt;  // the caller sees the stop itself
      }
      continue;
    }
    if (w == Wait::Failed) break;
    ssize_t n = ::read(out.read.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(chunk, static_cast<size_t>(n));
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  std::optional<int> status = p.wait_exit(std::max(left, std::chrono::milliseconds(1)));
  if (!status) {
    p.kill();
    return json{{"ok", false},
                {"reason", "the build took longer than " + std::to_string(timeout.count()) + " s"}};
  }
  for (const std::string& line : split(text, '\n')) {
    json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("ok")) return j;
  }
  return std::nullopt;
}

}  // namespace

std::string compiled_unsupported() {
  if (!KFORGE_HAS_AOTI)
    return "LibTorch " + libtorch_version() +
           " cannot load AOTInductor packages (PyTorch 2.6 or later can)";
  return "";
}

std::optional<std::string_view> compiled_mode(BaselineKind kind) {
  switch (kind) {
    case BaselineKind::Compiled:
      return "default";
    case BaselineKind::CompiledMaxAutotune:
      return "max-autotune";
    case BaselineKind::Eager:
    case BaselineKind::Scripted:
      break;
  }
  return std::nullopt;
}

std::vector<BaselineKind> compiled_kinds() {
  std::vector<BaselineKind> out;
  for (const BaselineKindInfo& info : baseline_kinds())
    if (compiled_mode(info.kind)) out.push_back(info.kind);
  return out;
}

CompiledPackage compiled_package(const tasks::Task& task, const std::vector<torch::Tensor>& inputs,
                                 int device, BaselineKind kind, const CompiledOptions& options) {
  std::optional<std::string_view> mode = compiled_mode(kind);
  if (!mode) throw Error("the " + std::string(to_string(kind)) + " baseline is no package");
  CompiledPackage out;
  out.kind = kind;
  if (!options.enabled) {
    out.absent = options.off_reason;
    return out;
  }
  if (kind == BaselineKind::CompiledMaxAutotune && !options.max_autotune) {
    out.absent = options.max_autotune_off_reason;
    return out;
  }
  if (out.absent = compiled_unsupported(); !out.absent.empty()) return out;
  json spec_inputs = json::array();
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto dtype = tasks::from_scalar_type(inputs[i].scalar_type());
    if (!dtype) throw Error("input " + std::to_string(i) + " has a dtype kforge does not know");
    spec_inputs.push_back({{"name", task.inputs.at(i).name},
                           {"shape", inputs[i].sizes().vec()},
                           {"dtype", std::string(tasks::dtype_name(*dtype))}});
  }
  std::string torch_version = libtorch_version();
  json key = {{"task", task.content_hash},
              {"inputs", spec_inputs},
              {"tf32", task.allow_tf32},
              {"mode", *mode},
              {"gpu", gpu_kind(device)},
              {"torch", torch_version},
              {"helper", content_hash(embedded::inductor_helper_kforge_inductor)}};
  std::string id = content_hash(key.dump()).substr(0, 32);
  std::string dir = (cache_dir() / "compiled" / id.substr(0, 2)).string();
  make_directories(dir);
  std::string base = dir + "/" + id;
  out.log = base + ".log";
  if (::access((base + ".pt2").c_str(), R_OK) == 0) {
    out.path = base + ".pt2";
    return out;
  }
  if (auto why = read_file(base + ".absent")) {
    out.absent = *why;
    return out;
  }
  std::string script = base + ".py";
  write_file_atomic(script, std::string(embedded::inductor_helper_kforge_inductor));
  json spec = {{"task", task.id()},     {"source", task.reference},
               {"inputs", spec_inputs}, {"allow_tf32", task.allow_tf32},
               {"mode", *mode},         {"device", device},
               {"out", base + ".pt2"},  {"expect_torch", torch_version}};
  write_file_atomic(base + ".json", spec.dump(2));
  std::vector<std::string> tried;
  auto started = std::chrono::steady_clock::now();
  for (const std::string& python : python_candidates(options.python)) {
    std::string resolved = find_in_path(python);
    if (resolved.empty() || ::access(resolved.c_str(), X_OK) != 0) {
      tried.push_back(python + ": not found");
      continue;
    }
    std::optional<json> r =
        run_helper(resolved, script, base + ".json", out.log, options.build_timeout, options.stop);
    // A helper the stop killed (or that died of the same signal, sent to kforge's process group).
    if (!r && options.stop && options.stop()) {
      out.absent = kCompiledInterrupted;  // not cached: the next command builds it
      return out;
    }
    if (!r) {
      tried.push_back(resolved + ": the helper failed (" + out.log + ")");
      continue;
    }
    if (r->value("ok", false)) {
      out.path = base + ".pt2";
      out.build_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      return out;
    }
    std::string reason = r->value("reason", "");
    // A Python without PyTorch (or with another version) is not the task's fault: try the next.
    bool environment = reason.find("has no PyTorch") != std::string::npos ||
                       reason.find("but kforge's LibTorch is") != std::string::npos ||
                       reason.find("sees no CUDA GPU") != std::string::npos;
    if (reason.find("out of memory") != std::string::npos) {
      out.absent = reason;
      out.transient = true;
      return out;
    }
    if (!environment) {
      out.absent = reason;
      write_file_atomic(base + ".absent", reason);  // the task's: not tried again
      return out;
    }
    tried.push_back(reason);
  }
  out.absent =
      "no Python with PyTorch " + torch_version + " (kforge's LibTorch) and a GPU was found";
  for (const std::string& t : tried) out.absent += "; " + t;
  out.absent += " (name one with $KFORGE_PYTHON)";
  return out;
}

std::vector<CompiledPackage> compiled_packages(
    const std::vector<const tasks::Task*>& tasks, int device, const CompiledOptions& options,
    const std::function<void(const tasks::Task&, const CompiledPackage&)>& done) {
  const std::vector<BaselineKind> kinds = compiled_kinds();
  std::vector<CompiledPackage> out(tasks.size() * kinds.size());
  int jobs = options.build_jobs > 0
                 ? options.build_jobs
                 : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::mutex report;
  // One pass builds the packages `todo` names, `jobs` at a time; a transient failure (out of the
  // GPU's memory while others autotune beside it) is tried again in the next pass, a quarter as
  // many at once, and is the task's own only when it fails alone.
  auto pass = [&](const std::vector<size_t>& todo, int at_once) {
    std::atomic<size_t> next{0};
    std::vector<size_t> again;
    auto work = [&] {
      for (size_t i; (i = next++) < todo.size();) {
        size_t k = todo[i];
        const tasks::Task& t = *tasks[k / kinds.size()];
        out[k] = CompiledPackage{};
        out[k].kind = kinds[k % kinds.size()];
        if (options.stop && options.stop()) {
          out[k].absent = kCompiledInterrupted;
          std::lock_guard<std::mutex> lock(report);
          if (done) done(t, out[k]);
          continue;
        }
        try {
          // Shapes and dtypes are all a package's key and build need: meta tensors hold no memory.
          std::vector<torch::Tensor> inputs;
          for (const tasks::InputSpec& in : t.inputs)
            inputs.push_back(
                torch::empty(t.shape_of(in, t.dims), torch::TensorOptions()
                                                         .dtype(tasks::to_scalar_type(in.dtype))
                                                         .device(torch::kMeta)));
          out[k] = compiled_package(t, inputs, device, out[k].kind, options);
        } catch (const std::exception& e) {
          out[k].absent = e.what();
        }
        std::lock_guard<std::mutex> lock(report);
        if (out[k].transient && at_once > 1)
          again.push_back(k);
        else if (done)
          done(t, out[k]);
      }
    };
    std::vector<std::thread> workers;
    for (int w = 1; w < std::min<int>(at_once, static_cast<int>(todo.size())); ++w)
      workers.emplace_back(work);
    work();
    for (std::thread& w : workers) w.join();
    std::sort(again.begin(), again.end());
    return again;
  };
  std::vector<size_t> todo(out.size());
  for (size_t k = 0; k < todo.size(); ++k) todo[k] = k;
  for (int at_once = jobs; !todo.empty(); at_once = std::max(1, at_once / 4)) {
    todo = pass(todo, at_once);
    if (at_once == 1) break;
  }
  return out;
}

#if KFORGE_HAS_AOTI
struct CompiledReference::Loaded {
  torch::inductor::AOTIModelPackageLoader loader;
  explicit Loaded(const std::string& path) : loader(path) {}  // on the device it was built for
};

CompiledReference::CompiledReference(const std::string& package, int) {
  try {
    loaded_ = std::make_unique<Loaded>(package);
  } catch (const std::exception& e) {
    throw Error("cannot load the AOTInductor package " + package + ": " +
                std::string(e.what()).substr(0, 500));
  }
}

std::vector<torch::Tensor> CompiledReference::run(const std::vector<torch::Tensor>& inputs) const {
  return loaded_->loader.run(inputs);
}
#else
struct CompiledReference::Loaded {};

CompiledReference::CompiledReference(const std::string&, int) {
  throw Error(compiled_unsupported());
}

std::vector<torch::Tensor> CompiledReference::run(const std::vector<torch::Tensor>&) const {
  throw Error(compiled_unsupported());
}
#endif

CompiledReference::~CompiledReference() = default;

}  // namespace kforge::verify
