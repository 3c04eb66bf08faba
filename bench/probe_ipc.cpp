// kforge-probe-ipc: the experiment behind verify/'s process model (issue 5's first GPU call).
// A parent (the judge's role) creates VMM allocations with POSIX-fd shareable handles and passes
// them over a Unix socket to children (the runner's role), which map them (inputs read-only)
// with an unmapped gap after each, and launch kernels that behave or misbehave. It prints what
// the driver did: import/map times, the error each fault gives, whether the parent survives,
// how long a hung child takes to kill and replace, and what compute-sanitizer says.
//
//   kforge-probe-ipc                     runs every case and prints one line per finding
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "kforge/common/files.h"
#include "kforge/compile/module.h"
#include "kforge/verify/channel.h"
#include "kforge/verify/driver.h"

using namespace kforge;
using namespace kforge::verify;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

constexpr int kChannelFd = 3;

const char* kKernels = R"(
extern "C" __global__ void scale(const float* in, float* out, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i];
}
extern "C" __global__ void write_input(float* in, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) in[i] = 0.0f;
}
extern "C" __global__ void read_at(const float* in, float* out, long long index) { out[0] = in[index]; }
extern "C" __global__ void write_at(float* out, long long index) { out[index] = 1.0f; }
extern "C" __global__ void hang(const float* in, float* out) {
  volatile const float* v = in;
  while (v[0] == v[0]) {}
  out[0] = 1.0f;
}
__device__ int counter;
extern "C" __global__ void bump(float* out) { out[0] = (float)(++counter); }
)";

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::string self_path() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  buf[n > 0 ? n : 0] = 0;
  return buf;
}

std::string cu_name(const Driver& d, CUresult r) {
  const char* name = nullptr;
  d.cuGetErrorName(r, &name);
  return name ? name : std::to_string(r);
}

CUcontext primary_context(const Driver& d) {
  CUdevice dev;
  KFORGE_CU_CHECK(d, d.cuDeviceGet(&dev, 0));
  CUcontext ctx;
  KFORGE_CU_CHECK(d, d.cuDevicePrimaryCtxRetain(&ctx, dev));
  KFORGE_CU_CHECK(d, d.cuCtxSetCurrent(ctx));
  return ctx;
}

// ---- child (runner role) ----

int child_main() {
  const Driver& d = Driver::get();
  d.require("the probe child");
  auto t0 = Clock::now();
  primary_context(d);
  double ctx_ms = ms_since(t0);
  Channel ch{UniqueFd(kChannelFd)};
  Message m;
  std::vector<CUdeviceptr> base;  // per buffer: start of the mapping
  CUmodule module = nullptr;
  while (ch.receive(m, std::chrono::hours(1)) == Received::Message) {
    const json& q = m.body;
    std::string op = q["op"];
    json reply{{"op", op}};
    if (op == "hello") {
      reply["ctx_ms"] = ctx_ms;
    } else if (op == "map") {
      auto t = Clock::now();
      size_t gran = q["granularity"];
      for (size_t i = 0; i < m.fds.size(); ++i) {
        size_t size = q["sizes"][i];
        bool read_only = q["read_only"][i];
        CUmemGenericAllocationHandle h;
        KFORGE_CU_CHECK(d, d.cuMemImportFromShareableHandle(
                               &h, reinterpret_cast<void*>(static_cast<intptr_t>(m.fds[i].get())),
                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        CUdeviceptr va;
        KFORGE_CU_CHECK(d, d.cuMemAddressReserve(&va, size + 2 * gran, gran, 0, 0));
        KFORGE_CU_CHECK(d, d.cuMemMap(va + gran, size, 0, h, 0));
        CUmemAccessDesc access{};
        access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access.location.id = 0;
        access.flags =
            read_only ? CU_MEM_ACCESS_FLAGS_PROT_READ : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        CUresult r = d.cuMemSetAccess(va + gran, size, &access, 1);
        reply["set_access"].push_back(cu_name(d, r));
        if (r != CUDA_SUCCESS && read_only) {  // fall back to read-write so the probe goes on
          access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
          KFORGE_CU_CHECK(d, d.cuMemSetAccess(va + gran, size, &access, 1));
        }
        base.push_back(va + gran);
      }
      reply["map_ms"] = ms_since(t);
    } else if (op == "module") {
      auto t = Clock::now();
      std::string cubin = read_all(m.fds.at(0).get());
      KFORGE_CU_CHECK(d, d.cuModuleLoadData(&module, cubin.data()));
      reply["load_ms"] = ms_since(t);
    } else if (op == "launch") {
      CUfunction f;
      KFORGE_CU_CHECK(d, d.cuModuleGetFunction(&f, module, q["kernel"].get<std::string>().c_str()));
      std::vector<CUdeviceptr> ptrs;
      std::vector<long long> ints;
      ptrs.reserve(8);
      ints.reserve(8);
      std::vector<void*> args;
      for (const json& a : q["args"]) {
        if (a.contains("buffer")) {
          ptrs.push_back(base.at(a["buffer"].get<size_t>()) + a.value("offset", size_t{0}));
          args.push_back(&ptrs.back());
        } else {
          ints.push_back(a["int"].get<long long>());
          args.push_back(&ints.back());
        }
      }
      if (q.value("reset_counter", false)) {
        CUdeviceptr g;
        size_t bytes;
        auto t = Clock::now();
        KFORGE_CU_CHECK(d, d.cuModuleGetGlobal(&g, &bytes, module, "counter"));
        int zero = 0;
        KFORGE_CU_CHECK(d, d.cuMemcpyHtoD(g, &zero, sizeof zero));
        reply["reset_us"] = ms_since(t) * 1000;
      }
      auto t = Clock::now();
      unsigned grid = q.value("grid", 1u), block = q.value("block", 1u);
      CUresult r = d.cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, nullptr, args.data(), nullptr);
      reply["launch"] = cu_name(d, r);
      r = d.cuCtxSynchronize();
      reply["sync"] = cu_name(d, r);
      reply["ms"] = ms_since(t);
      if (r != CUDA_SUCCESS) {
        ch.send(reply);
        return 1;  // the context is gone: a runner exits
      }
    } else if (op == "bye") {
      ch.send(reply);
      return 0;
    }
    ch.send(reply);
  }
  return 0;
}

// ---- parent (judge role) ----

struct Shared {
  CUmemGenericAllocationHandle handle;
  CUdeviceptr va;
  size_t size;
  UniqueFd fd;
};

struct Probe {
  const Driver& d = Driver::get();
  size_t gran = 0;
  std::vector<Shared> buffers;
  std::string cubin;
  std::string sanitizer;

  void line(const std::string& key, const json& value) {
    std::cout << key << ": " << value.dump() << std::endl;
  }

  Shared make_buffer(size_t size) {
    CUmemAllocationProp prop = shareable_allocation(0);
    Shared s;
    s.size = size;
    KFORGE_CU_CHECK(d, d.cuMemCreate(&s.handle, size, &prop, 0));
    int fd = -1;
    KFORGE_CU_CHECK(d, d.cuMemExportToShareableHandle(&fd, s.handle,
                                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    s.fd.reset(fd);
    KFORGE_CU_CHECK(d, d.cuMemAddressReserve(&s.va, size, gran, 0, 0));
    KFORGE_CU_CHECK(d, d.cuMemMap(s.va, size, 0, s.handle, 0));
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = 0;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    KFORGE_CU_CHECK(d, d.cuMemSetAccess(s.va, size, &access, 1));
    return s;
  }

  std::unique_ptr<ChildProcess> start_child(const std::vector<std::string>& prefix = {}) {
    std::vector<std::string> argv = prefix;
    argv.push_back(self_path());
    argv.push_back("--child");
    auto c = std::make_unique<ChildProcess>(argv, kChannelFd);
    c->channel().send({{"op", "hello"}});
    ask(*c, {{"op", "hello"}}, 60000, false);
    std::vector<int> fds;
    json sizes, ro;
    for (size_t i = 0; i < buffers.size(); ++i) {
      fds.push_back(buffers[i].fd.get());
      sizes.push_back(buffers[i].size);
      ro.push_back(i == 0);
    }
    json map = ask(*c, {{"op", "map"}, {"granularity", gran}, {"sizes", sizes}, {"read_only", ro}},
                   60000, true, fds);
    line("child map", map);
    UniqueFd mod = memfd_with("probe-module", cubin);
    line("child module", ask(*c, {{"op", "module"}}, 60000, true, {mod.get()}));
    return c;
  }

  json ask(ChildProcess& c, const json& q, int timeout_ms, bool send = true,
           const std::vector<int>& fds = {}) {
    if (send) c.channel().send(q, fds);
    Message m;
    Received r = c.channel().receive(m, std::chrono::milliseconds(timeout_ms));
    if (r == Received::Message) return m.body;
    return json{{"received", r == Received::Timeout ? "timeout" : "closed"}};
  }

  json launch(const std::string& kernel, json args, unsigned grid = 1, unsigned block = 1) {
    return {{"op", "launch"},
            {"kernel", kernel},
            {"args", std::move(args)},
            {"grid", grid},
            {"block", block}};
  }

  // The parent's own context still works and its data survived.
  json parent_health() {
    auto t = Clock::now();
    std::vector<float> host(4);
    CUresult r = d.cuMemcpyDtoH(host.data(), buffers[0].va, sizeof(float) * 4);
    CUresult s = d.cuCtxSynchronize();
    return {
        {"copy", cu_name(d, r)}, {"sync", cu_name(d, s)}, {"in0", host[0]}, {"ms", ms_since(t)}};
  }

  void run() {
    d.require("the probe");
    primary_context(d);
    CUmemAllocationProp prop = shareable_allocation(0);
    KFORGE_CU_CHECK(
        d, d.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    line("granularity", gran);
    auto t = Clock::now();
    buffers.push_back(make_buffer(gran));  // input: 2 MiB of floats
    buffers.push_back(make_buffer(gran));  // output
    line("create+export+map 2 buffers ms", ms_since(t));
    const long long n = static_cast<long long>(gran / 4);
    std::vector<float> host(n);
    for (long long i = 0; i < n; ++i) host[i] = static_cast<float>(i % 1000) * 0.5f;
    KFORGE_CU_CHECK(d, d.cuMemcpyHtoD(buffers[0].va, host.data(), gran));

    compile::ModuleRequest req;
    req.source = kKernels;
    req.arch = "sm_90a";
    compile::Module mod = compile::compile_module_here(req);
    if (!mod.ok) throw Error("probe kernels do not compile: " + mod.log);
    cubin = mod.cubin;

    json in{{"buffer", 0}}, out{{"buffer", 1}};
    {  // honest work, globals reset, write to a read-only input
      auto c = start_child();
      line("scale", ask(*c, launch("scale", {in, out, {{"int", n}}}, (n + 255) / 256, 256), 60000));
      std::vector<float> back(n);
      KFORGE_CU_CHECK(d, d.cuMemcpyDtoH(back.data(), buffers[1].va, gran));
      long long bad = 0;
      for (long long i = 0; i < n; ++i) bad += back[i] != 2 * host[i];
      line("scale output wrong elements (parent view)", bad);
      ask(*c, launch("bump", {out}), 60000);
      ask(*c, launch("bump", {out}), 60000);
      float v = 0;
      KFORGE_CU_CHECK(d, d.cuMemcpyDtoH(&v, buffers[1].va, 4));
      line("bump twice without reset -> out[0]", v);
      json q = launch("bump", {out});
      q["reset_counter"] = true;
      line("bump with reset", ask(*c, q, 60000));
      KFORGE_CU_CHECK(d, d.cuMemcpyDtoH(&v, buffers[1].va, 4));
      line("bump after reset -> out[0]", v);
      auto t2 = Clock::now();
      line("write into read-only input",
           ask(*c, launch("write_input", {in, {{"int", n}}}, (n + 255) / 256, 256), 60000));
      line("child after fault",
           c->wait_exit(std::chrono::milliseconds(5000)).value_or("still running"));
      line("fault to exit ms", ms_since(t2));
      std::vector<float> back_in(4);
      KFORGE_CU_CHECK(d, d.cuMemcpyDtoH(back_in.data(), buffers[0].va, 16));
      line("input[1] after write_input (was 0.5)", back_in[1]);
      line("parent health", parent_health());
    }
    for (const char* which : {"read", "write"}) {  // one element past the end: into the gap
      auto c = start_child();
      std::string k = std::string(which) + "_at";
      json q = std::string(which) == "read" ? launch(k, {in, out, {{"int", n}}})
                                            : launch(k, {out, {{"int", n}}});
      line(std::string(which) + " one past the end", ask(*c, q, 60000));
      c->wait_exit(std::chrono::milliseconds(5000));
      line("parent health", parent_health());
      line("child stderr", c->stderr_tail(300));
    }
    {  // a hang: killed by the parent
      auto c = start_child();
      c->channel().send(launch("hang", {in, out}));
      auto t3 = Clock::now();
      json r = ask(*c, json(), 2000, false);
      line("hang reply within 2 s", r);
      // The parent's own work while the child's kernel spins.
      auto tp = Clock::now();
      CUresult s = d.cuMemsetD8Async(buffers[1].va, 0, 1024, nullptr);
      CUresult y = d.cuCtxSynchronize();
      line("parent memset during hang",
           json{{"memset", cu_name(d, s)}, {"sync", cu_name(d, y)}, {"ms", ms_since(tp)}});
      auto tk = Clock::now();
      line("kill", c->kill_now());
      line("kill to reaped ms", ms_since(tk));
      line("parent health after kill", parent_health());
      auto tn = Clock::now();
      auto c2 = start_child();
      line("new child ready ms", ms_since(tn));
      line("scale on the new child",
           ask(*c2, launch("scale", {in, out, {{"int", n}}}, (n + 255) / 256, 256), 60000));
      line("hang total ms", ms_since(t3));
    }
    const char* cs = std::getenv("KFORGE_COMPUTE_SANITIZER");
    std::string tool = cs ? cs : "compute-sanitizer";
    for (long long index :
         {n, n - 1 + 32}) {  // memcheck on an imported buffer: into the gap, and past
      std::string log = "/tmp/kforge-probe-memcheck.log";
      auto ts = Clock::now();
      auto c = start_child({tool, "--tool", "memcheck", "--log-file", log, "--print-limit", "4"});
      line("memcheck start ms", ms_since(ts));
      line("memcheck read index " + std::to_string(index),
           ask(*c, launch("read_at", {in, out, {{"int", index}}}), 120000));
      ask(*c, {{"op", "bye"}}, 30000);
      line("memcheck child",
           c->wait_exit(std::chrono::milliseconds(30000)).value_or("still running"));
      line("memcheck total ms", ms_since(ts));
      std::string text = read_file(log).value_or("").substr(0, 4096);
      std::cout << "---- memcheck log ----\n"
                << text << "\n---- child stderr ----\n"
                << c->stderr_tail(1500) << std::endl;
    }
    {  // memcheck on an honest run: no false report on imported memory
      std::string log = "/tmp/kforge-probe-memcheck2.log";
      auto c = start_child({tool, "--tool", "memcheck", "--log-file", log});
      line("memcheck honest scale",
           ask(*c, launch("scale", {in, out, {{"int", n}}}, (n + 255) / 256, 256), 120000));
      ask(*c, {{"op", "bye"}}, 30000);
      c->wait_exit(std::chrono::milliseconds(30000));
      std::string text = read_file(log).value_or("").substr(0, 4096);
      std::cout << "---- memcheck honest log ----\n" << text << std::endl;
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::string(argv[1]) == "--child") return child_main();
    Probe p;
    p.run();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "probe: " << e.what() << std::endl;
    return 1;
  }
}
