// The judge-runner protocol (docs/protocol.md): the messages, as C++ values with their JSON form.
// The runner is a separate process that only loads candidate modules and launches plans on
// buffers the judge shares with it; it never sees a reference.
#pragma once

#include <kforge_launch.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kforge::verify {

// Bumped by hand whenever the protocol's messages change meaning (pinned by a test).
inline constexpr int kProtocolVersion = 4;
// The harness version (a verdict's, not a message's) is kHarnessVersion in outcome.h.

// One buffer the judge shares: an allocation of `allocation_bytes` (a multiple of the VMM
// granularity) whose last `bytes` (rounded up to 256) hold the tensor, starting at `offset`.
// The runner maps it with an unmapped gap on both sides; inputs are mapped read-only.
struct BufferSpec {
  std::string name;
  uint64_t allocation_bytes = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  bool read_only = false;
};

struct LaunchArg {
  int buffer = -1;               // index into the buffers, or -1 for an integer
  int64_t value = 0;             // integers
  int bytes = 8;                 // integers: 4 or 8, the kernel parameter's width
  kforge_launch::TensorMap map;  // rank > 0: a tensor map of the buffer, passed by value
};

struct LaunchSpecWire {
  int index = -1;  // the plan's launch[index], named in a failure (-1: the position here)
  int kernel = 0;  // index into the module's kernels
  std::array<int64_t, 3> grid{1, 1, 1}, block{1, 1, 1}, cluster{1, 1, 1};
  int64_t shared_bytes = 0;
  bool cooperative = false;
  std::vector<LaunchArg> args;
};

struct RunRequest {
  std::vector<LaunchSpecWire> launches;
  std::vector<int> zero_buffers;  // workspaces with zero_init, cleared before the first launch
  int repeat = 1;                 // the whole plan, back to back (globals reset before each)
  bool timed =
      false;  // hold, L2 flush, then CUDA events around the work: workspace zeroing and launches
};

// The runner's answer to a run. On `ok == false`, `stage` is "launch" (the driver refused a
// launch: the context is still usable) or "sync" (the kernel faulted: the runner exits).
struct RunReply {
  bool ok = false;
  std::string stage;
  int launch = -1;              // which launch was refused
  std::string error;            // CUDA error name, e.g. CUDA_ERROR_ILLEGAL_ADDRESS
  std::string message;          // the driver's words
  double ms = 0;                // wall time of the run, launches to synchronize
  double gpu_ms = 0;            // timed runs: CUDA event time on the runner's stream
  bool hold_timed_out = false;  // timed runs: the hold gave up before the work was enqueued
};

nlohmann::json to_json(const BufferSpec& b);
BufferSpec buffer_from_json(const nlohmann::json& j);
nlohmann::json to_json(const RunRequest& r);
RunRequest run_request_from_json(const nlohmann::json& j);
nlohmann::json to_json(const RunReply& r);
RunReply run_reply_from_json(const nlohmann::json& j);

// Names of the module-scope device variables (`.global` in PTX) that the runner resets before
// every run to their values at load time.
std::vector<std::string> ptx_global_variables(const std::string& ptx);

}  // namespace kforge::verify
