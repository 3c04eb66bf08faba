// `kforge doctor`: what this machine gives kforge, and why anything is missing.
#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "command_list.h"
#include "commands.h"
#include "kforge/archive/location.h"
#include "kforge/common/paths.h"
#include "kforge/common/sandbox.h"
#include "kforge/compile/nvrtc.h"
#include "kforge/tasks/reference.h"
#include "kforge/tasks/task.h"
#include "kforge/verify/clocks.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/judge.h"

namespace kforge::cli {
namespace {

std::string gib(double bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << bytes / (1024.0 * 1024 * 1024) << " GiB";
  return os.str();
}

// The Python kforge's PyTorch helpers use (KernelBench import, torch.compile's baseline): the
// first candidate that imports torch, with its version; null when none does.
nlohmann::ordered_json python_with_torch() {
  for (const std::string& python : python_candidates()) {
    std::string quoted = "'";
    for (char c : python) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    quoted += "'";
    FILE* p = ::popen(
        (quoted + " -c 'import sys, torch; sys.stdout.write(torch.__version__)' 2>/dev/null")
            .c_str(),
        "r");
    if (!p) continue;
    char buf[256];
    std::string version;
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) version.append(buf, n);
    if (::pclose(p) != 0 || version.empty()) continue;
    std::string bare = version.substr(0, version.find('+'));  // 2.11.0+cu130 -> 2.11.0
    return {{"path", python}, {"torch", version}, {"matches_libtorch", bare == TORCH_VERSION}};
  }
  return nullptr;
}

int run_doctor(bool as_json) {
  namespace fs = std::filesystem;
  nlohmann::ordered_json j;
  j["kforge"] = KFORGE_VERSION;
  compile::NvrtcVersion nv = compile::nvrtc_version();
  j["nvrtc"] = std::to_string(nv.major) + "." + std::to_string(nv.minor);
  j["cuda_headers"] =
      std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10);
  j["libtorch"] = TORCH_VERSION;
  j["libtorch_cuda_built"] = at::hasCUDA();
  j["libtorch_cuda_available"] = torch::cuda::is_available();
  j["torchscript_prelude"] = tasks::prelude_version();
  j["compile_sandbox"] = landlock_support();

  const verify::Driver& driver = verify::Driver::get();
  std::string target_arch = "sm_90a";
  if (driver.available()) {
    int v = verify::driver_version();
    j["driver"] = std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
    j["gpus"] = nlohmann::json::array();
    for (const auto& d : verify::list_devices()) {
      j["gpus"].push_back(
          {{"index", d.ordinal},
           {"name", d.name},
           {"uuid", d.uuid},
           {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
           {"sms", d.sm_count},
           {"l2_bytes", d.l2_bytes},
           {"memory_bytes", d.memory_bytes},
           {"max_shared_per_block_optin", d.max_shared_per_block_optin}});
      if (d.ordinal == 0) target_arch = compile::arch_for(d.cc_major, d.cc_minor);
      verify::ClockMonitor clocks(
          d.uuid);  // one reading of what kforge records while timing (clocks.h)
      clocks.sample();
      j["gpus"].back()["clocks"] = clocks.summary();
    }
  } else {
    j["driver"] = nullptr;
    j["gpus"] = nlohmann::json::array();
    j["no_gpu_reason"] = driver.unavailable_reason();
  }
  j["target_arch"] = target_arch;
  fs::path tasks_root = tasks::default_tasks_root();
  j["tasks_dir"] = tasks_root.string();
  fs::path cache = cache_dir();
  j["cache_dir"] = cache.string();
  fs::path db = archive::database_path();
  j["database"] = db.string();
  j["database_exists"] = fs::exists(db);
  j["python"] = python_with_torch();
  j["compute_sanitizer"] = verify::find_compute_sanitizer();
  j["ncu"] = verify::find_cuda_tool("ncu");

  if (as_json) {
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  auto row = [](const std::string& k, const std::string& v) {
    std::cout << std::left << std::setw(14) << k << v << "\n";
  };
  row("kforge", KFORGE_VERSION);
  row("NVRTC", j["nvrtc"].get<std::string>() + " (CUDA headers " +
                   j["cuda_headers"].get<std::string>() + ")");
  row("LibTorch",
      std::string(TORCH_VERSION) +
          (at::hasCUDA() ? (torch::cuda::is_available() ? ", CUDA available"
                                                        : ", built with CUDA, no GPU usable")
                         : ", CPU only (no CUDA)") +
          ", TorchScript prelude " + std::string(tasks::prelude_version()));
  std::string sandbox = j["compile_sandbox"].get<std::string>();
  row("Sandbox", sandbox.rfind("Landlock", 0) == 0
                     ? sandbox + ": NVRTC workers read only the CUDA headers (docs/security.md)"
                     : sandbox +
                           ": NVRTC workers are not confined; kforge's include checks alone guard "
                           "(docs/security.md)");
  if (driver.available()) {
    row("Driver", j["driver"].get<std::string>());
    for (const auto& g : j["gpus"])
      row("GPU " + std::to_string(g["index"].get<int>()),
          g["name"].get<std::string>() + ", sm " + g["compute_capability"].get<std::string>() +
              ", " + std::to_string(g["sms"].get<int>()) + " SMs, L2 " +
              std::to_string(g["l2_bytes"].get<int>() / (1024 * 1024)) + " MiB, " +
              gib(static_cast<double>(g["memory_bytes"].get<size_t>())) + ", " +
              g["uuid"].get<std::string>());
    for (const auto& g : j["gpus"])
      row("SM clock " + std::to_string(g["index"].get<int>()), verify::clock_text(g["clocks"]));
  } else {
    row("GPU", "none usable: " + driver.unavailable_reason());
    std::cout << std::setw(14) << ""
              << "GPU commands (verify, corpus, baseline, evolve, gpu-worker, tasks check "
                 "--device cuda) will refuse to run;\n"
              << std::setw(14) << ""
              << "loading tasks, references on the CPU and NVRTC compiles work.\n";
  }
  row("Target arch", target_arch + (driver.available() ? " (GPU 0)" : " (default without a GPU)"));
  row("Tasks", tasks_root.string());
  row("Cache", cache.string());
  row("Database", db.string() + (fs::exists(db) ? "" : " (not created yet)"));
  const auto& py = j["python"];
  row("Python",
      py.is_null()
          ? "none with PyTorch (python3, /usr/bin/python3, $KFORGE_PYTHON): KernelBench import "
            "and torch.compile's baseline need one"
          : py["path"].get<std::string>() + ", PyTorch " + py["torch"].get<std::string>() +
                (py["matches_libtorch"].get<bool>()
                     ? " (LibTorch's version: torch.compile's baseline can use it)"
                     : " (not LibTorch's " + std::string(TORCH_VERSION) +
                           ": KernelBench import works, torch.compile's baseline needs the same "
                           "version)"));
  std::string sanitizer = j["compute_sanitizer"];
  row("Sanitizer", sanitizer.empty() ? "compute-sanitizer not found: admission runs without "
                                       "memcheck, initcheck and racecheck (docs/design.md)"
                                     : sanitizer);
  std::string ncu = j["ncu"];
  row("Profiler", ncu.empty() ? "ncu (Nsight Compute) not found: prompts carry no profile "
                                "feedback (docs/evolve.md)"
                              : ncu);
  return kExitOk;
}

}  // namespace

void add_doctor_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("doctor", command_description("doctor"));
  auto as_json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *as_json, "Machine-readable output");
  cmd->callback([&exit_code, as_json] { exit_code = run_doctor(*as_json); });
}

}  // namespace kforge::cli
