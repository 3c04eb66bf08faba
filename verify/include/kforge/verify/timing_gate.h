// What makes a timed region measure the GPU and nothing else (docs/design.md, Verification 3):
//   hold(s)    a kernel that keeps stream `s` waiting until the host calls release(), so the host's
//              cost of enqueueing the work (driver calls, LibTorch dispatch, TorchScript's
//              interpreter) never lands between the start event and the work;
//   flush(s)   a kernel that reads a buffer of twice the L2 size (a memset would leave dirty lines
//              to be written back during the timed work).
// Used by the runner (candidates) and the judge (eager and scripted baselines) alike:
//   hold → flush → start event → work → stop event → release → synchronise.
// Driver API only (no LibTorch): the runner links it. Needs a current context.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

namespace kforge::verify {

// The harness's own kernels as PTX (ISA 7.0, sm_75+, JIT-compiled by the driver), kept beside
// the CUDA they came from in timing_gate.cpp. A CPU test assembles it with ptxas.
const std::string& harness_kernels_ptx();

class TimingGate {
 public:
  // `device`: the ordinal (for its L2 size). Loads the harness kernels into the current context
  // and allocates the flush buffer and a host-mapped flag.
  explicit TimingGate(int device);
  ~TimingGate();
  TimingGate(const TimingGate&) = delete;
  TimingGate& operator=(const TimingGate&) = delete;

  void hold(CUstream stream);
  void flush(CUstream stream);
  void release();
  // After a synchronisation: whether the last hold gave up waiting (the host took longer than
  // the hold's limit to enqueue the work, or the work synchronised inside: then that sample
  // includes host time). Clears the mark.
  bool timed_out();

  int64_t flush_bytes() const { return flush_bytes_; }
  static constexpr uint64_t kHoldLimitNs = 200'000'000;  // 200 ms

 private:
  CUmodule module_ = nullptr;
  CUfunction hold_ = nullptr, flush_ = nullptr;
  CUdeviceptr buffer_ = 0, sink_ = 0;
  int64_t flush_bytes_ = 0;
  int blocks_ = 1;
  volatile unsigned* flag_ = nullptr;  // host memory, mapped: [0] the release flag, [1] timed out
  CUdeviceptr flag_device_ = 0;
};

}  // namespace kforge::verify
