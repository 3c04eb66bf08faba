// The judge-runner channel, protocol and watchdog, with a fake runner process (no GPU needed).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "kforge/verify/channel.h"
#include "kforge/verify/outcome.h"
#include "kforge/verify/protocol.h"
#include "kforge/verify/runner_client.h"
#include "kforge/verify/timing_gate.h"
#include "test_util.h"

using namespace kforge::verify;
using nlohmann::json;

namespace {

RunnerOptions fake(std::vector<std::string> extra = {}) {
  RunnerOptions o;
  o.command = {KFORGE_FAKE_RUNNER};
  o.command.insert(o.command.end(), extra.begin(), extra.end());
  o.start_timeout = std::chrono::milliseconds(5000);
  return o;
}

RunRequest behaviour(int kernel) {
  RunRequest q;
  LaunchSpecWire l;
  l.kernel = kernel;
  l.grid = {4, 1, 1};
  l.block = {256, 1, 1};
  l.args = {LaunchArg{0, 0, 8}, LaunchArg{-1, 12345678901LL, 8}, LaunchArg{-1, -7, 4}};
  q.launches.push_back(l);
  q.zero_buffers = {1};
  return q;
}

const auto kWatchdog = std::chrono::milliseconds(400);

}  // namespace

TEST(Protocol, VersionsArePinned) {
  // Changing either is a decision: update docs/protocol.md and this pin together.
  EXPECT_EQ(kProtocolVersion, 4);  // 4: tensor map arguments
  EXPECT_EQ(kHarnessVersion, 3);
}

TEST(Protocol, RunRequestAndReplyRoundTrip) {
  RunRequest q = behaviour(2);
  q.launches[0].cluster = {2, 1, 1};
  q.launches[0].shared_bytes = 65536;
  q.launches[0].cooperative = true;
  q.repeat = 3;
  LaunchArg map{1, 0, 8};  // a tensor map of buffer 1: [4096, 128] float16, boxes [64, 64]
  map.map.rank = 2;
  map.map.dims[0] = 4096, map.map.dims[1] = 128;
  map.map.box[0] = 64, map.map.box[1] = 64;
  map.map.element_bytes = 2;
  map.map.type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  map.map.swizzle = 128;
  q.launches[0].args.push_back(map);
  RunRequest back = run_request_from_json(json::parse(to_json(q).dump()));
  EXPECT_EQ(to_json(back), to_json(q));
  const kforge_launch::TensorMap& m = back.launches[0].args[3].map;
  EXPECT_EQ(back.launches[0].args[3].buffer, 1);
  EXPECT_EQ(m.rank, 2);
  EXPECT_EQ(m.dims[0], 4096);
  EXPECT_EQ(m.box[1], 64);
  EXPECT_EQ(m.type, CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
  EXPECT_EQ(m.swizzle, 128);
  EXPECT_EQ(back.launches[0].args[0].map.rank, 0);
  EXPECT_EQ(back.launches[0].args[1].value, 12345678901LL);
  EXPECT_EQ(back.launches[0].args[2].bytes, 4);
  EXPECT_EQ(back.launches[0].args[0].buffer, 0);

  RunReply r{
      false, "sync", 2, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered",
      1.5};
  RunReply rb = run_reply_from_json(to_json(r));
  EXPECT_EQ(to_json(rb), to_json(r));
  RunReply timed{true, "", -1, "", "", 0.4, 0.05, true};
  EXPECT_TRUE(run_reply_from_json(to_json(timed)).hold_timed_out);
  EXPECT_DOUBLE_EQ(run_reply_from_json(to_json(timed)).gpu_ms, 0.05);
  BufferSpec b{"x", 4 << 20, (4 << 20) - 1024, 1000, true};
  EXPECT_EQ(to_json(buffer_from_json(to_json(b))), to_json(b));
}

TEST(TimingGate, HarnessKernelsAssembleForSm90) {
  // The hold and flush kernels are PTX the driver JIT-compiles on the GPU machine; here ptxas
  // checks them (it needs no GPU).
  EXPECT_NE(harness_kernels_ptx().find(".entry kforge_hold"), std::string::npos);
  EXPECT_NE(harness_kernels_ptx().find(".entry kforge_flush"), std::string::npos);
  std::string ptxas;
  for (const char* p : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"})
    if (::access(p, X_OK) == 0) ptxas = p;
  if (ptxas.empty())
    GTEST_SKIP() << "ptxas not installed: the harness kernels' PTX is not assembled here";
  kforge::test::TempDir dir;
  auto file = dir.write("harness.ptx", harness_kernels_ptx());
  std::string cmd = ptxas + " -arch=sm_90 " + file.string() + " -o " +
                    (dir.path() / "harness.cubin").string() + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(Protocol, FindsModuleGlobalsInPtx) {
  const std::string ptx = R"(
.version 8.8
.target sm_90a
.global .align 4 .u32 counter;
.global .align 4 .b8 cache[256];
.visible .global .align 4 .u32 hidden = 5;
.const .align 4 .b8 c[16];
.extern .global .align 4 .u32 elsewhere;
.global .align 8 .b8 _ZN2ns3bigE[24] = {1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3};
.visible .entry k(.param .u64 k_param_0) {
	ld.global.u32 	%r1, [counter];
	st.global.u32 	[counter], %r2;
}
)";
  EXPECT_EQ(ptx_global_variables(ptx),
            (std::vector<std::string>{"counter", "cache", "hidden", "_ZN2ns3bigE"}));
  EXPECT_TRUE(ptx_global_variables(".visible .entry k() { ret; }").empty());
}

TEST(Channel, CarriesLinesAndDescriptorsInOrder) {
  auto [a, b] = socket_pair();
  Channel left(std::move(a)), right(std::move(b));
  UniqueFd f1 = memfd_with("one", "first"), f2 = memfd_with("two", "second!");
  left.send({{"op", "first"}}, {f1.get()});
  left.send({{"op", "plain"}});
  left.send({{"op", "second"}, {"big", std::string(200000, 'x')}}, {f2.get(), f1.get()});
  Message m;
  ASSERT_EQ(right.receive(m, std::chrono::milliseconds(1000)), Received::Message);
  EXPECT_EQ(m.body["op"], "first");
  ASSERT_EQ(m.fds.size(), 1u);
  EXPECT_EQ(read_all(m.fds[0].get()), "first");
  ASSERT_EQ(right.receive(m, std::chrono::milliseconds(1000)), Received::Message);
  EXPECT_EQ(m.body["op"], "plain");
  EXPECT_TRUE(m.fds.empty());
  ASSERT_EQ(right.receive(m, std::chrono::milliseconds(1000)), Received::Message);
  EXPECT_EQ(m.body["big"].get<std::string>().size(), 200000u);
  ASSERT_EQ(m.fds.size(), 2u);
  EXPECT_EQ(read_all(m.fds[0].get()), "second!");
  EXPECT_EQ(read_all(m.fds[1].get()), "first");
}

TEST(Channel, TimeoutClosedAndGarbage) {
  auto [a, b] = socket_pair();
  Channel right(std::move(b));
  Message m;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(right.receive(m, std::chrono::milliseconds(100)), Received::Timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(90));
  std::string junk = "{\"op\": \"x\", \"fds\": 2}\nnot json\n";
  ASSERT_EQ(::write(a.get(), junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  EXPECT_THROW(right.receive(m, std::chrono::milliseconds(100)),
               ChannelError);  // announces 2, none came
  EXPECT_THROW(right.receive(m, std::chrono::milliseconds(100)), ChannelError);  // not JSON
  a.reset();
  EXPECT_EQ(right.receive(m, std::chrono::milliseconds(100)), Received::Closed);
}

namespace {

// How many of this process's descriptors are open on a file whose link starts with `prefix`
// ("/memfd:a": memfd_with("a", ...), as /proc shows it).
int open_descriptors_of(const std::string& prefix) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    std::filesystem::path target = std::filesystem::read_symlink(e.path(), ec);
    if (!ec && target.string().rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

}  // namespace

TEST(RunnerClient, RunsAndKeepsOneRunner) {
  RunnerClient c(fake());
  ASSERT_TRUE(c.run(behaviour(0), kWatchdog).ok());
  pid_t pid = c.pid();
  ASSERT_TRUE(c.run(behaviour(0), kWatchdog).ok());
  EXPECT_EQ(c.pid(), pid);
  EXPECT_EQ(c.runners_started(), 1);
}

TEST(RunnerClient, HangIsKilledByTheWatchdogAndTheNextRunWorks) {
  RunnerClient c(fake());
  ASSERT_TRUE(c.run(behaviour(0), kWatchdog).ok());
  auto t0 = std::chrono::steady_clock::now();
  RunResult r = c.run(behaviour(1), kWatchdog);
  EXPECT_EQ(r.status, RunStatus::Timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_NE(r.evidence.find("within 400 ms"), std::string::npos) << r.evidence;
  EXPECT_NE(r.evidence.find("signal 9"), std::string::npos) << r.evidence;
  EXPECT_TRUE(c.run(behaviour(0), kWatchdog).ok());
  EXPECT_EQ(c.runners_started(), 2);
}

TEST(RunnerClient, CrashIsDiedWithTheSignalAndStderr) {
  RunnerClient c(fake());
  RunResult r = c.run(behaviour(2), kWatchdog);
  EXPECT_EQ(r.status, RunStatus::Died);
  EXPECT_NE(r.evidence.find("signal 6"), std::string::npos) << r.evidence;
  EXPECT_TRUE(c.run(behaviour(0), kWatchdog).ok());
  EXPECT_EQ(c.runners_started(), 2);
}

TEST(RunnerClient, FaultEndsTheRunnerLaunchErrorDoesNot) {
  RunnerClient c(fake());
  RunResult f = c.run(behaviour(3), kWatchdog);
  EXPECT_EQ(f.status, RunStatus::Fault);
  EXPECT_EQ(f.reply.error, "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_NE(f.evidence.find("exited with status 3"), std::string::npos) << f.evidence;
  RunResult l = c.run(behaviour(4), kWatchdog);
  EXPECT_EQ(l.status, RunStatus::LaunchError);
  EXPECT_EQ(l.reply.launch, 0);
  pid_t pid = c.pid();
  EXPECT_TRUE(c.run(behaviour(0), kWatchdog).ok());
  EXPECT_EQ(c.pid(), pid);
  EXPECT_EQ(c.runners_started(), 2);
}

TEST(RunnerClient, GarbageFromTheRunnerIsAHarnessError) {
  RunnerClient c(fake());
  EXPECT_THROW(c.run(behaviour(5), kWatchdog), ChannelError);
}

TEST(RunnerClient, BuffersAndModuleReachEveryNewRunner) {
  RunnerClient c(fake());
  UniqueFd a = memfd_with("a", "aaaa"), b = memfd_with("b", "bb");
  c.set_buffers({BufferSpec{"x", 2 << 20, 0, 4, true}, BufferSpec{"out", 2 << 20, 0, 2, false}},
                {a.get(), b.get()});
  EXPECT_TRUE(c.set_module(ModuleImage{"cubin", {"k"}, {}}).ok());
  EXPECT_EQ(c.run(behaviour(6), kWatchdog).reply.ms, 2);
  EXPECT_EQ(c.run(behaviour(2), kWatchdog).status, RunStatus::Died);
  EXPECT_EQ(c.run(behaviour(6), kWatchdog).reply.ms, 2);  // the new runner got both buffers
  RunResult bad = c.set_module(ModuleImage{"cubin", {"bad"}, {}});
  EXPECT_EQ(bad.status, RunStatus::LaunchError);
  EXPECT_NE(bad.evidence.find("CUDA_ERROR_NOT_FOUND"), std::string::npos) << bad.evidence;
}

TEST(RunnerClient, DroppedBuffersLeaveTheRunnerAndAreNotSentToTheNext) {
  RunnerClient c(fake());
  UniqueFd a = memfd_with("a", "aaaa"), b = memfd_with("b", "bb");
  c.set_buffers({BufferSpec{"x", 2 << 20, 0, 4, true}, BufferSpec{"out", 2 << 20, 0, 2, false}},
                {a.get(), b.get()});
  EXPECT_EQ(c.run(behaviour(6), kWatchdog).reply.ms, 2);
  EXPECT_EQ(open_descriptors_of("/memfd:a"), 2);  // ours and the client's duplicate
  pid_t pid = c.pid();
  c.drop_buffers();
  EXPECT_EQ(c.run(behaviour(6), kWatchdog).reply.ms, 0);  // the runner holds none now
  EXPECT_EQ(c.pid(), pid);
  EXPECT_EQ(c.run(behaviour(2), kWatchdog).status, RunStatus::Died);
  EXPECT_EQ(c.run(behaviour(6), kWatchdog).reply.ms, 0);  // nor does the next runner
  // The client's duplicates are closed: only this test's own descriptor is left on each memfd.
  EXPECT_EQ(open_descriptors_of("/memfd:a"), 1);
  EXPECT_EQ(open_descriptors_of("/memfd:b"), 1);
}

TEST(RunnerClient, ARunnerThatNeverStartsOrSpeaksAnotherProtocolIsAHarnessError) {
  RunnerOptions slow = fake({"--no-ready"});
  slow.start_timeout = std::chrono::milliseconds(300);
  RunnerClient c(slow);
  try {
    c.run(behaviour(0), kWatchdog);
    FAIL() << "expected an error";
  } catch (const kforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not start"), std::string::npos) << e.what();
  }
  RunnerClient old(fake({"--protocol", "0"}));
  EXPECT_THROW(old.run(behaviour(0), kWatchdog), kforge::Error);
  RunnerOptions nowhere;
  nowhere.command = {"/nonexistent/kforge-runner"};
  RunnerClient missing(nowhere);
  EXPECT_THROW(missing.run(behaviour(0), kWatchdog), kforge::Error);
}
