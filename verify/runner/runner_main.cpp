// kforge-runner: the only process that runs candidate code. CUDA driver API only (dlopen'ed), no
// LibTorch, no references. It maps the buffers the judge shares (inputs read-only, an unmapped gap
// on both sides of each), loads one module at a time, resets its global variables before every
// run and launches plans. A kernel fault ends this process; the judge starts another.
//
//   kforge-runner --channel-fd N [--device D]      (started by verify::RunnerClient)
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <kforge_launch.h>

#include "kforge/verify/channel.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/protocol.h"
#include "kforge/verify/timing_gate.h"

using namespace kforge;
using namespace kforge::verify;
using nlohmann::json;

namespace {

// A driver error that ends the request with its name (not a harness bug in this process).
struct DriverFailure {
  CUresult code;
  std::string what;
};

class Runner {
 public:
  Runner(int device, Channel& channel) : d_(Driver::get()), channel_(channel), ordinal_(device) {
    d_.require("kforge-runner");
    KFORGE_CU_CHECK(d_, d_.cuDeviceGet(&device_, device));
    KFORGE_CU_CHECK(d_, d_.cuDevicePrimaryCtxRetain(&context_, device_));
    KFORGE_CU_CHECK(d_, d_.cuCtxSetCurrent(context_));
    KFORGE_CU_CHECK(d_, d_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    KFORGE_CU_CHECK(d_, d_.cuEventCreate(&start_, CU_EVENT_DEFAULT));
    KFORGE_CU_CHECK(d_, d_.cuEventCreate(&stop_, CU_EVENT_DEFAULT));
    CUmemAllocationProp prop = shareable_allocation(device);
    KFORGE_CU_CHECK(d_, d_.cuMemGetAllocationGranularity(&granularity_, &prop,
                                                         CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  }

  // Serves requests until "exit", EOF or a fault. Returns the process exit status.
  int serve() {
    channel_.send({{"op", "ready"}, {"protocol", kProtocolVersion}, {"pid", ::getpid()}});
    Message m;
    while (channel_.receive(m, std::chrono::hours(24 * 365)) == Received::Message) {
      const std::string op = m.body.value("op", "");
      if (op == "buffers") {
        map_buffers(m);
      } else if (op == "module") {
        load_module(m);
      } else if (op == "run") {
        RunReply r = run(run_request_from_json(m.body));
        channel_.send(to_json(r));
        if (!r.ok && r.stage == "sync") return 3;  // the context is unusable: this runner is done
      } else if (op == "exit") {
        return 0;
      } else {
        channel_.send({{"op", "error"}, {"message", "unknown op '" + op + "'"}});
        return 2;
      }
    }
    return 0;
  }

 private:
  struct Mapping {
    CUmemGenericAllocationHandle handle = 0;
    CUdeviceptr reserved = 0;  // the reservation: gap, allocation, gap
    uint64_t reserved_bytes = 0, allocation_bytes = 0;
    CUdeviceptr data = 0;  // where the tensor starts
    uint64_t bytes = 0;    // the tensor's bytes (the canary bytes after it are not ours)
  };
  struct Global {
    CUdeviceptr ptr = 0;
    std::string initial;
  };

  std::string name_of(CUresult r) const {
    const char* n = nullptr;
    d_.cuGetErrorName(r, &n);
    return n ? n : std::to_string(r);
  }
  std::string text_of(CUresult r) const {
    const char* t = nullptr;
    d_.cuGetErrorString(r, &t);
    return t ? t : "";
  }

  void unmap_all() {
    for (Mapping& m : mappings_) {
      d_.cuMemUnmap(m.reserved + granularity_, m.allocation_bytes);
      d_.cuMemAddressFree(m.reserved, m.reserved_bytes);
      d_.cuMemRelease(m.handle);
    }
    mappings_.clear();
  }

  void map_buffers(Message& m) {
    unmap_all();
    const json& specs = m.body.at("buffers");
    if (specs.size() != m.fds.size())
      throw ChannelError("buffers: one descriptor per buffer expected");
    for (size_t i = 0; i < specs.size(); ++i) {
      BufferSpec b = buffer_from_json(specs[i]);
      Mapping map;
      map.allocation_bytes = b.allocation_bytes;
      map.reserved_bytes = b.allocation_bytes + 2 * granularity_;
      void* handle = reinterpret_cast<void*>(static_cast<intptr_t>(m.fds[i].get()));
      KFORGE_CU_CHECK(d_, d_.cuMemImportFromShareableHandle(
                              &map.handle, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
      KFORGE_CU_CHECK(
          d_, d_.cuMemAddressReserve(&map.reserved, map.reserved_bytes, granularity_, 0, 0));
      KFORGE_CU_CHECK(
          d_, d_.cuMemMap(map.reserved + granularity_, b.allocation_bytes, 0, map.handle, 0));
      CUmemAccessDesc access{};
      access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access.location.id = device_;
      access.flags =
          b.read_only ? CU_MEM_ACCESS_FLAGS_PROT_READ : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      KFORGE_CU_CHECK(
          d_, d_.cuMemSetAccess(map.reserved + granularity_, b.allocation_bytes, &access, 1));
      map.data = map.reserved + granularity_ + b.offset;
      map.bytes = b.bytes;
      mappings_.push_back(map);
    }
    channel_.send({{"op", "buffers"}, {"ok", true}, {"count", mappings_.size()}});
  }

  void load_module(Message& m) {
    if (module_) d_.cuModuleUnload(module_);
    module_ = nullptr;
    functions_.clear();
    globals_.clear();
    image_ = read_all(m.fds.at(0).get());
    kernels_ = m.body.at("kernels").get<std::vector<std::string>>();
    global_names_ = m.body.at("globals").get<std::vector<std::string>>();
    reload_each_run_ = false;
    auto t0 = std::chrono::steady_clock::now();
    json reply{{"op", "module"}};
    try {
      load_image();
      reply["ok"] = true;
    } catch (const DriverFailure& f) {
      reply["ok"] = false;
      reply["error"] = name_of(f.code);
      reply["message"] = f.what + ": " + text_of(f.code);
    }
    reply["ms"] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    channel_.send(reply);
  }

  void try_cu(CUresult r, const std::string& what) {
    if (r != CUDA_SUCCESS) throw DriverFailure{r, what};
  }

  void load_image() {
    if (module_) d_.cuModuleUnload(module_);
    functions_.clear();
    try_cu(d_.cuModuleLoadData(&module_, image_.data()), "loading the module");
    for (const std::string& k : kernels_) {
      CUfunction f;
      try_cu(d_.cuModuleGetFunction(&f, module_, k.c_str()), "finding kernel " + k);
      functions_.push_back(f);
    }
    if (!globals_.empty() || reload_each_run_) return;  // initial values are read once
    for (const std::string& g : global_names_) {
      Global global;
      size_t bytes = 0;
      if (d_.cuModuleGetGlobal(&global.ptr, &bytes, module_, g.c_str()) != CUDA_SUCCESS) {
        reload_each_run_ = true;  // a variable kforge cannot address: a fresh module per run
        globals_.clear();
        return;
      }
      global.initial.resize(bytes);
      try_cu(d_.cuMemcpyDtoH(global.initial.data(), global.ptr, bytes), "reading global " + g);
      globals_.push_back(std::move(global));
    }
  }

  void reset_globals() {
    if (reload_each_run_) {
      try_cu(d_.cuStreamSynchronize(stream_), "waiting for the kernels");
      load_image();
    }
    for (const Global& g : globals_)
      try_cu(d_.cuMemcpyHtoDAsync(g.ptr, g.initial.data(), g.initial.size(), stream_),
             "resetting globals");
  }

  // Part of the plan's work: inside the timed region.
  void zero_workspaces(const RunRequest& q) {
    for (int b : q.zero_buffers)
      try_cu(d_.cuMemsetD8Async(mappings_.at(b).data, 0, mappings_.at(b).bytes, stream_),
             "zeroing a workspace");
  }

  // kforge_launch::launch: the semantics exported libraries share.
  void launch(const LaunchSpecWire& l) {
    kforge_launch::Launch spec;
    for (int k = 0; k < 3; ++k)
      spec.grid[k] = l.grid[k], spec.block[k] = l.block[k], spec.cluster[k] = l.cluster[k];
    spec.shared_bytes = l.shared_bytes;
    spec.cooperative = l.cooperative;
    std::vector<kforge_launch::Arg> args(l.args.size());
    for (size_t i = 0; i < l.args.size(); ++i) {
      const LaunchArg& a = l.args[i];
      args[i].pointer = a.buffer >= 0;
      args[i].value = a.buffer >= 0 ? mappings_.at(a.buffer).data : static_cast<uint64_t>(a.value);
      args[i].bytes = a.bytes;
      if (a.map.rank > 0) {  // the judge checked it; so does the runner, against what it mapped
        std::string why = kforge_launch::check_tensor_map(a.map, mappings_.at(a.buffer).bytes);
        if (!why.empty())
          throw DriverFailure{CUDA_ERROR_INVALID_VALUE, "the tensor map of argument " +
                                                            std::to_string(i) + ": " +
                                                            kforge_launch::place(why, "")};
        args[i].map = a.map;
      }
    }
    std::string what;
    CUresult r =
        kforge_launch::launch(launch_driver_, functions_.at(l.kernel), spec, args, stream_, &what);
    try_cu(r, what);
  }

  static bool is_fault(CUresult r) {
    switch (r) {
      case CUDA_ERROR_ILLEGAL_ADDRESS:
      case CUDA_ERROR_MISALIGNED_ADDRESS:
      case CUDA_ERROR_LAUNCH_FAILED:
      case CUDA_ERROR_ILLEGAL_INSTRUCTION:
      case CUDA_ERROR_HARDWARE_STACK_ERROR:
      case CUDA_ERROR_INVALID_PC:
      case CUDA_ERROR_ASSERT:
      case CUDA_ERROR_INVALID_ADDRESS_SPACE:
      case CUDA_ERROR_LAUNCH_TIMEOUT:
      case CUDA_ERROR_ECC_UNCORRECTABLE:
        return true;
      default:
        return false;
    }
  }

  // Timed runs: hold → flush → start event → work → stop event → release (timing_gate.h). The
  // hold is released on every way out, so the stream never waits on this process for long.
  RunReply run(const RunRequest& q) {
    RunReply r;
    auto t0 = std::chrono::steady_clock::now();
    if (q.timed && !gate_) gate_ = std::make_unique<TimingGate>(ordinal_);
    struct Release {
      TimingGate* gate;
      ~Release() {
        if (gate) gate->release();
      }
    } release{nullptr};
    for (int rep = 0; rep < q.repeat; ++rep) {
      try {
        reset_globals();
        if (q.timed && rep == 0) {
          gate_->hold(stream_);
          release.gate = gate_.get();
          gate_->flush(stream_);
          try_cu(d_.cuEventRecord(start_, stream_), "recording an event");
        }
        zero_workspaces(q);
      } catch (const DriverFailure& f) {
        return failure(is_fault(f.code) ? "sync" : "launch", -1, f);
      }
      for (size_t i = 0; i < q.launches.size(); ++i) {
        try {
          launch(q.launches[i]);
        } catch (const DriverFailure& f) {
          // A fault of an earlier launch can surface here; the driver's own refusals cannot fault.
          const int named = q.launches[i].index >= 0 ? q.launches[i].index : static_cast<int>(i);
          return failure(is_fault(f.code) ? "sync" : "launch", named, f);
        }
      }
    }
    if (q.timed) {
      CUresult e = d_.cuEventRecord(stop_, stream_);
      if (e != CUDA_SUCCESS)
        return failure(is_fault(e) ? "sync" : "launch", -1, DriverFailure{e, "recording an event"});
      gate_->release();
    }
    CUresult s = d_.cuStreamSynchronize(stream_);
    if (s == CUDA_SUCCESS)
      s = d_.cuCtxSynchronize();  // device-wide: nothing of the plan still runs
    if (s != CUDA_SUCCESS) return failure("sync", -1, DriverFailure{s, "waiting for the kernels"});
    if (q.timed) {
      float ms = 0;
      KFORGE_CU_CHECK(d_, d_.cuEventElapsedTime(&ms, start_, stop_));
      r.gpu_ms = ms;
      r.hold_timed_out = gate_->timed_out();
    }
    r.ok = true;
    r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }

  RunReply failure(const std::string& stage, int launch_index, const DriverFailure& f) {
    if (gate_) gate_->release();
    RunReply r;
    r.ok = false;
    r.stage = stage;
    r.launch = launch_index;
    r.error = name_of(f.code);
    r.message = f.what + ": " + text_of(f.code);
    if (stage == "launch") {  // make sure an earlier kernel did not fault meanwhile
      CUresult s = d_.cuStreamSynchronize(stream_);
      if (s != CUDA_SUCCESS && is_fault(s)) {
        r.stage = "sync";
        r.error = name_of(s);
        r.message = "waiting for the kernels: " + text_of(s);
      }
    }
    return r;
  }

  const Driver& d_;
  // The three entry points kforge_launch::launch calls, from the libcuda opened at run time.
  kforge_launch::Driver launch_driver_{d_.cuFuncSetAttribute, d_.cuLaunchKernel,
                                       d_.cuLaunchKernelEx, d_.cuTensorMapEncodeTiled};
  Channel& channel_;
  int ordinal_ = 0;
  std::unique_ptr<TimingGate> gate_;  // made by the first timed run
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr, stop_ = nullptr;
  size_t granularity_ = 0;
  std::vector<Mapping> mappings_;
  CUmodule module_ = nullptr;
  std::string image_;
  std::vector<std::string> kernels_, global_names_;
  std::vector<CUfunction> functions_;
  std::vector<Global> globals_;
  bool reload_each_run_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  int fd = -1, device = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--channel-fd")
      fd = std::stoi(argv[i + 1]);
    else if (a == "--device")
      device = std::stoi(argv[i + 1]);
  }
  if (fd < 0) {
    std::cerr << "kforge-runner is started by kforge (verify): it needs --channel-fd N"
              << std::endl;
    return 2;
  }
  Channel channel{UniqueFd(fd)};
  try {
    Runner runner(device, channel);
    return runner.serve();
  } catch (const std::exception& e) {
    std::cerr << "kforge-runner: " << e.what() << std::endl;
    try {
      channel.send({{"op", "error"}, {"message", e.what()}});
    } catch (...) {
    }
    return 2;
  }
}
