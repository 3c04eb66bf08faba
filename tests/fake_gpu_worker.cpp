// kforge-fake-gpu-worker: `kforge gpu-worker` (evolve::serve_gpu_jobs, the real protocol, task
// loading and compiles) with the fake GPU (fake_gpu.h) in place of the judge, for the tests of
// `kforge evolve` on a pool of GPU workers (tests/test_scale.cpp). Its GPU's uuid is
// GPU-fake-worker-<I>.
//   kforge-fake-gpu-worker --connect HOST:PORT --worker I [options]
//   --die-after N   exits (status 3) in its Nth screen or judgment, without answering
//   --hang-after N  never answers its Nth screen or judgment
//   --busy-ms M     each screen and judgment takes M ms
//   --name NAME     its GPU's name (another kind of GPU)
#include <cstdlib>
#include <iostream>
#include <thread>

#include "fake_gpu.h"
#include "kforge/evolve/remote_gpu.h"

namespace {

using namespace kforge;

class MisbehavingGpu : public test::FakeGpu {
 public:
  int die_after = 0, hang_after = 0;
  verify::Verdict verify(const tasks::Task& task, const evolve::Checked& c) override {
    measured();
    return FakeGpu::verify(task, c);
  }
  verify::Verdict screen(const tasks::Task& task, const evolve::Checked& c) override {
    measured();
    return FakeGpu::screen(task, c);
  }

 private:
  int count_ = 0;
  void measured() {
    ++count_;
    if (count_ == die_after) std::_Exit(3);
    if (count_ == hang_after) std::this_thread::sleep_for(std::chrono::hours(1));
  }
};

}  // namespace

int main(int argc, char** argv) {
  evolve::GpuWorkerOptions o;
  MisbehavingGpu gpu;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--connect")
      o.address = next();
    else if (a == "--worker")
      o.worker = std::stoi(next());
    else if (a == "--die-after")
      gpu.die_after = std::stoi(next());
    else if (a == "--hang-after")
      gpu.hang_after = std::stoi(next());
    else if (a == "--busy-ms")
      gpu.busy_ms = std::stoi(next());
    else if (a == "--name")
      gpu.name = next();
    else {
      std::cerr << "kforge-fake-gpu-worker: unknown argument " << a << "\n";
      return 2;
    }
  }
  gpu.uuid = "GPU-fake-worker-" + std::to_string(o.worker);
  if (const char* t = std::getenv("KFORGE_WORKER_TOKEN")) o.token = t;
  o.facts = compile::DeviceFacts::for_arch("sm_90a");
  o.compiler.workers = 1;
  try {
    evolve::serve_gpu_jobs(o, gpu);
  } catch (const std::exception& e) {
    std::cerr << "kforge-fake-gpu-worker: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
