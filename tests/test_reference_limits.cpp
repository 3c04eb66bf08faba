// References run under a time and memory limit (tasks/reference_child.h): a task whose reference
// never returns or eats the memory fails with a message naming its file, and never hangs
// `tasks check`, `tasks show` or `compile --task`. The real kforge binary, on the CPU.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>

#include "test_util.h"

namespace {

using kforge::test::TempDir;

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
  double seconds = 0;
};

// `env` goes before the binary; coreutils' timeout keeps a regression from hanging the suite
// (a hung command exits 124 and the test fails).
Result kforge_cli(const std::string& args, const std::string& env = "") {
  std::string cmd = env + " timeout -s KILL 120 " + KFORGE_BINARY + " " + args + " 2>&1";
  Result r;
  auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// valid_task() with its reference replaced.
std::string task_with_reference(const std::string& name, const std::string& body) {
  std::string t = kforge::test::valid_task(name);
  size_t from = t.find("def forward");
  size_t to = t.find("\"\"\"", from);
  return t.substr(0, from) + body + t.substr(to);
}

// TorchScript compiles this; it never returns, on any device, at any dims.
const char* kSpinForever = R"(def forward(x: Tensor) -> Tensor:
    while True:
        x = x + 1.0
    return x
)";

std::string honest_answer() {
  return (kforge::test::source_dir() / "tests/gpu/honest/vector_add.md").string();
}

TEST(ReferenceLimits, NeverReturningReferenceFailsItsTaskAndTheCheckGoesOn) {
  TempDir dir;
  auto spin = dir.write("s/spin.toml", task_with_reference("spin", kSpinForever));
  dir.write("s/good.toml", kforge::test::valid_task("good"));
  Result r = kforge_cli("tasks check " + (dir.path() / "s").string() + " --reference-time-limit 2");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(
      r.out.find(spin.string() + ": reference: did not finish within 2 s on check dims (N=1)"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("ok    s/good"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 of 2 task(s) ok, 1 failing"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, 60)
      << r.out;  // the limit plus two kforge start-ups, with room for a loaded machine
}

TEST(ReferenceLimits, NeverReturningReferenceStopsTasksShowWithExit2) {
  TempDir dir;
  auto spin = dir.write("s/spin.toml", task_with_reference("spin", kSpinForever));
  Result r = kforge_cli("tasks show " + spin.string(), "KFORGE_REFERENCE_TIME_LIMIT=2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(
      r.out.find(spin.string() + ": reference: did not finish within 2 s on timed dims (N=64)"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("KFORGE_REFERENCE_TIME_LIMIT"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, 60) << r.out;
}

TEST(ReferenceLimits, NeverReturningReferenceStopsCompileWithExit2) {
  TempDir dir;
  auto spin = dir.write("s/spin.toml", task_with_reference("spin", kSpinForever));
  Result r = kforge_cli("compile --answer " + honest_answer() + " --task " + spin.string() +
                        " --reference-time-limit 1.5");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(spin.string() + ": reference: did not finish within 1.5 s on dims (N=1)"),
            std::string::npos)
      << r.out;
  EXPECT_LT(r.seconds, 60) << r.out;
}

TEST(ReferenceLimits, ReferencePastTheMemoryLimitFailsItsTask) {
  TempDir dir;
  // 2 GiB of float32 ones at any dims: fine without a limit, past a 1 GiB one (which leaves room
  // for kforge itself: LibTorch with CUDA starts larger than the CPU build's ~100 MB).
  auto hog = dir.write("s/hog.toml", task_with_reference("hog", R"(def forward(x: Tensor) -> Tensor:
    return x + torch.ones([536870912]).sum()
)"));
  Result r = kforge_cli("tasks check " + hog.string(), "KFORGE_REFERENCE_MEMORY_LIMIT=1G");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL  s/hog"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("can't allocate memory"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the reference's memory limit: 1 GiB"), std::string::npos) << r.out;
}

TEST(ReferenceLimits, InvalidLimitsAreBadArgumentsNamingTheOption) {
  TempDir dir;
  auto good = dir.write("s/good.toml", kforge::test::valid_task("good"));
  for (const char* bad : {"0", "nan", "1e300", "''"}) {
    Result r = kforge_cli("tasks check " + good.string() + " --reference-time-limit " + bad);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("--reference-time-limit: must be a number of seconds"), std::string::npos)
        << r.out;
  }
  Result env = kforge_cli("tasks show " + good.string(), "KFORGE_REFERENCE_TIME_LIMIT=nan");
  EXPECT_EQ(env.code, 2) << env.out;
  EXPECT_NE(env.out.find("KFORGE_REFERENCE_TIME_LIMIT: must be"), std::string::npos) << env.out;
  Result mem = kforge_cli("tasks show " + good.string(), "KFORGE_REFERENCE_MEMORY_LIMIT=12abc");
  EXPECT_EQ(mem.code, 2) << mem.out;
  EXPECT_NE(mem.out.find("KFORGE_REFERENCE_MEMORY_LIMIT: must be a size"), std::string::npos)
      << mem.out;
}

TEST(ReferenceLimits, ChecksAndShapesThroughTheChildMatchTheTask) {
  TempDir dir;
  auto good = dir.write("s/good.toml", kforge::test::valid_task("good"));
  Result check = kforge_cli("tasks check " + good.string() + " --json");
  EXPECT_EQ(check.code, 0) << check.out;
  EXPECT_NE(check.out.find("\"shape\": [\n              37\n"), std::string::npos) << check.out;
  // x * 2 has a meta kernel in every LibTorch (relu lacks one in 1.13): shapes without data.
  auto twice = dir.write(
      "s/twice.toml",
      task_with_reference("twice", "def forward(x: Tensor) -> Tensor:\n    return x * 2.0\n"));
  Result show = kforge_cli("tasks show " + twice.string() + " --json");
  EXPECT_EQ(show.code, 0) << show.out;
  EXPECT_NE(show.out.find("\"bytes_that_must_move\": 512"), std::string::npos)
      << show.out;  // 64 floats in, 64 out
}

}  // namespace
