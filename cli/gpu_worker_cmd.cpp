// `kforge gpu-worker --connect HOST:PORT --worker I`: a judge on one GPU for a `kforge evolve` that
// runs elsewhere (another GPU of this machine, or another machine), started by `kforge evolve
// --gpus` or by a launcher from its --worker-command (docs/scale.md).
#include <cstdlib>
#include <iostream>

#include "command_list.h"
#include "commands.h"
#include "compiled_baselines.h"
#include "kforge/common/error.h"
#include "kforge/common/strings.h"
#include "kforge/evolve/remote_gpu.h"
#include "kforge/verify/device_facts.h"
#include "kforge/verify/driver.h"

namespace kforge::cli {
namespace {

struct GpuWorkerArgs {
  std::string connect, devices, token;
  int worker = 0, device = 0, jobs = 2;
  bool no_compile = false, no_max_autotune = false;
};

int run_gpu_worker(const GpuWorkerArgs& a) {
  int device = a.device;
  if (!a.devices.empty()) {  // the GPU of this worker's index in the list
    std::vector<std::string> list = split(a.devices, ',');
    if (a.worker < 0 || static_cast<size_t>(a.worker) >= list.size())
      throw UsageError("--devices " + a.devices + " has no entry for --worker " +
                       std::to_string(a.worker));
    const std::string& entry = list[static_cast<size_t>(a.worker)];
    if (entry.empty() || entry.size() > 4 ||
        entry.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError("--devices " + a.devices + ": '" + entry + "' is not a GPU number");
    device = std::stoi(entry);
  }
  verify::Driver::get().require("kforge gpu-worker");
  evolve::GpuWorkerOptions o;
  o.address = a.connect;
  o.worker = a.worker;
  o.token = a.token;
  if (o.token.empty())
    if (const char* t = std::getenv("KFORGE_WORKER_TOKEN")) o.token = t;
  o.facts = verify::plan_facts(device);
  o.measured =
      verify::device_facts(device);  // for the parent's prompts (cached per device and driver)
  o.compiler.workers = static_cast<size_t>(std::max(1, a.jobs));
  verify::VerifyOptions vo;
  vo.device = device;
  apply_no_compile(a.no_compile, vo);
  apply_no_max_autotune(a.no_max_autotune, vo);
  std::unique_ptr<evolve::Gpu> gpu = evolve::make_judge_gpu(vo);
  evolve::serve_gpu_jobs(o, *gpu);
  return kExitOk;
}

}  // namespace

void add_gpu_worker_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<GpuWorkerArgs>();
  auto* cmd = app.add_subcommand("gpu-worker", command_description("gpu-worker"));
  cmd->add_option("--connect", a->connect,
                  "HOST:PORT of the kforge evolve that started it (its {address})")
      ->required();
  cmd->add_option("--worker", a->worker, "This worker's index in the pool (its {worker})")
      ->required();
  cmd->add_option("--device", a->device, "The GPU to judge on (CUDA ordinal)");
  cmd->add_option("--devices", a->devices,
                  "A GPU per worker index (0,1,...): this worker takes the one at --worker");
  cmd->add_option("--token", a->token,
                  "The pool's token (default: $KFORGE_WORKER_TOKEN, which the launcher passes on)");
  cmd->add_option("-j,--jobs", a->jobs, "Compile processes");
  cmd->add_flag("--no-compile", a->no_compile,
                "Do not time torch.compile's baselines (as kforge evolve --no-compile)");
  cmd->add_flag("--no-max-autotune", a->no_max_autotune,
                "Do not time torch.compile's max-autotune baseline (as kforge evolve "
                "--no-max-autotune)");
  cmd->callback([a, &exit_code] { exit_code = run_gpu_worker(*a); });
}

}  // namespace kforge::cli
