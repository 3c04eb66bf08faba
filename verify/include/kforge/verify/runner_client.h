// The judge's handle on a runner process (verify/runner): starts it, shares buffers and the
// module with it, runs plans under a watchdog, and replaces it after a fault, a hang or a crash.
// A failed run is data (RunResult), never an exception; harness failures throw.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kforge/verify/channel.h"
#include "kforge/verify/protocol.h"

namespace kforge::verify {

struct RunnerOptions {
  // The runner's command line; "--channel-fd 3" is appended. Default: kforge-runner next to
  // this executable (or $KFORGE_RUNNER), "--device N".
  std::vector<std::string> command;
  int device = 0;
  std::chrono::milliseconds start_timeout{60000};  // ready, buffers and module load
  std::vector<std::string> wrapper;                // e.g. compute-sanitizer --tool memcheck ...
};

enum class RunStatus {
  Ok,
  LaunchError,  // the driver refused a launch or the module (the runner lives on)
  Fault,        // a kernel faulted (illegal address, ...): the runner has exited
  Timeout,      // the watchdog fired: the runner was killed
  Died,         // the runner ended without an answer (crash, signal)
};
std::string_view to_string(RunStatus s);

struct RunResult {
  RunStatus status = RunStatus::Ok;
  RunReply reply;        // the runner's answer, when there was one
  std::string evidence;  // for humans: what happened, with the runner's exit and stderr tail
  double wall_ms = 0;    // request to answer, as the judge saw it
  bool ok() const { return status == RunStatus::Ok; }
};

struct ModuleImage {
  std::string cubin;
  std::vector<std::string> kernels;  // lowered names; launches refer to them by index
  std::vector<std::string> globals;  // module variables to reset before each run
};

class RunnerClient {
 public:
  explicit RunnerClient(RunnerOptions options = {});
  ~RunnerClient();

  // Shared with the runner now and every runner from now on (descriptors are duplicated and kept).
  RunResult set_buffers(std::vector<BufferSpec> specs, const std::vector<int>& fds);
  // The buffers given up: the runner unmaps them now and the duplicated descriptors close, so their
  // memory goes back to the driver once the judge frees its own handles. Without this, the
  // runner's mappings of a finished verification stay resident until the next one maps its own,
  // and the next memory plan counts them as used (session 30: 6-8 GiB on an H100). A runner that
  // does not answer is stopped.
  void drop_buffers();
  // Loads the module in the runner now. A module the driver refuses is a LaunchError result.
  RunResult set_module(ModuleImage image);
  RunResult run(const RunRequest& request, std::chrono::milliseconds watchdog);

  int runners_started() const { return started_; }
  // Stops the current runner (a fresh one starts at the next request): admission uses this.
  void restart();
  // Asks the runner to exit and waits up to `grace` (a runner under compute-sanitizer writes its
  // report as it exits), then kills it.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  pid_t pid() const;

 private:
  RunResult ensure_started();
  RunResult send_buffers();
  RunResult exchange(const nlohmann::json& request, const std::vector<int>& fds,
                     std::chrono::milliseconds limit, const std::string& what);
  RunResult ended(RunStatus status, const std::string& what, double wall_ms);

  RunnerOptions options_;
  std::unique_ptr<ChildProcess> child_;
  std::vector<BufferSpec> buffers_;
  std::vector<UniqueFd> fds_;
  std::optional<ModuleImage> module_;
  int started_ = 0;
};

// kforge-runner next to the running executable (or $KFORGE_RUNNER).
std::string default_runner_path();

}  // namespace kforge::verify
