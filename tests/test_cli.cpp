// The kforge binary end to end: exit codes, and messages a user can act on.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "kforge/common/files.h"
#include "kforge/verify/driver.h"
#include "test_util.h"

namespace {

using kforge::test::TempDir;

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

Result kforge_cli(const std::string& args) {
  std::string cmd = std::string(KFORGE_BINARY) + " " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string tasks_dir() {
  return (kforge::test::source_dir() / "tasks").string();
}

TEST(Cli, DoctorReportsToolchainAndGpuState) {
  Result r = kforge_cli("doctor");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("NVRTC"), std::string::npos);
  EXPECT_NE(r.out.find("LibTorch"), std::string::npos);
  if (!kforge::verify::Driver::get().available()) {
    EXPECT_NE(r.out.find("none usable"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(kforge::verify::Driver::get().unavailable_reason()), std::string::npos);
    EXPECT_NE(r.out.find("evolve, gpu-worker"), std::string::npos) << r.out;
  }
  // Issue 40: the Python with PyTorch the helpers use, compute-sanitizer and ncu, found or not.
  for (const char* row : {"\nPython ", "\nSanitizer ", "\nProfiler "})
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  if (!kforge::test::torch_python().empty())
    EXPECT_NE(r.out.find(", PyTorch "), std::string::npos) << r.out;
  Result j = kforge_cli("doctor --json");
  EXPECT_EQ(j.code, 0);
  auto doc = nlohmann::json::parse(j.out);
  for (const char* key : {"python", "compute_sanitizer", "ncu"})
    EXPECT_TRUE(doc.contains(key)) << key << "\n" << j.out;
  EXPECT_NE(j.out.find("\"nvrtc\""), std::string::npos);
}

TEST(Cli, GpuCommandWithoutGpuSaysSoAndExits3) {
  if (kforge::verify::Driver::get().available())
    GTEST_SKIP() << "a GPU is present; this pins the no-GPU path";
  Result r = kforge_cli("tasks check smoke/relu --device cuda --tasks-dir " + tasks_dir());
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("needs an NVIDIA GPU"), std::string::npos) << r.out;
  Result corpus = kforge_cli(
      "corpus " + (kforge::test::source_dir() / "tests/gpu/exploits").string() + " --no-store");
  EXPECT_EQ(corpus.code, 3) << corpus.out;
  EXPECT_NE(corpus.out.find("kforge corpus needs an NVIDIA GPU"), std::string::npos) << corpus.out;
}

// Issue 40: kforge evolve checks what it can without a GPU first (exit 2, naming the task, flag,
// key or run), before it asks for a GPU or starts a worker; --dry-run says what a run would do.
TEST(Cli, EvolveChecksItsInputsBeforeTheGpuAndItsWorkers) {
  TempDir dir;
  const std::string common =
      " --tasks-dir " + tasks_dir() + " --db " + (dir.path() / "a.db").string();
  Result r = kforge_cli("evolve nosuch" + common);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no task or suite named 'nosuch'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("suites there: level1, level2, smoke"), std::string::npos)
      << "the suites to pick from\n"
      << r.out;
  r = kforge_cli("evolve smoke --model foo:bar" + common);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown provider 'foo'"), std::string::npos) << r.out;
  auto config = dir.write("run.toml", "tasks = [\"smoke\"]\ngeneratons = 3\n");
  r = kforge_cli("evolve --config " + config.string() + common);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("generatons"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(config.string()), std::string::npos) << r.out;
  r = kforge_cli("evolve --resume 99" + common);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no run 99"), std::string::npos) << r.out;
  // A worker is not started (on Slurm: no allocation spent) for a run that cannot start.
  const auto mark = dir.path() / "worker-started";
  r = kforge_cli("evolve nosuch --workers 1 --worker-command 'touch " + mark.string() + "'" +
                 common);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_FALSE(std::filesystem::exists(mark)) << "a worker was started for a run with no tasks";

  const auto fresh = dir.path() / "fresh.db";
  r = kforge_cli("evolve smoke --generations 3 --budget-minutes 20 --dry-run --tasks-dir " +
                 tasks_dir() + " --db " + fresh.string());
  EXPECT_EQ(r.code, 0) << r.out;
  for (const char* part : {"nothing is judged, asked or recorded", "smoke/vector_add", "3 per task",
                           "minutes 20", "offline: the tuner"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
  EXPECT_FALSE(std::filesystem::exists(fresh)) << "a dry run of a new run records nothing";
  r = kforge_cli("evolve smoke --model openai:gpt-4.1 --dry-run" + common);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("the model openai:gpt-4.1"), std::string::npos) << r.out;
  if (!kforge::verify::Driver::get().available()) {
    EXPECT_NE(r.out.find("no GPU here"), std::string::npos) << r.out;
    r = kforge_cli("evolve smoke" + common);
    EXPECT_EQ(r.code, 3) << r.out;
    EXPECT_NE(r.out.find("needs an NVIDIA GPU"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--worker-command"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--dry-run"), std::string::npos) << r.out;
  }
}

TEST(Cli, TasksListAndShow) {
  Result list = kforge_cli("tasks list smoke --tasks-dir " + tasks_dir());
  EXPECT_EQ(list.code, 0) << list.out;
  EXPECT_NE(list.out.find("smoke/softmax"), std::string::npos);
  Result show = kforge_cli("tasks show smoke/vector_add --tasks-dir " + tasks_dir());
  EXPECT_EQ(show.code, 0) << show.out;
  EXPECT_NE(show.out.find("bytes that must move"), std::string::npos);
  EXPECT_NE(show.out.find("201 MB"), std::string::npos) << show.out;  // 3 x 16 Mi x 4 bytes
  Result json = kforge_cli("tasks show level1/matmul_square --json --tasks-dir " + tasks_dir());
  EXPECT_EQ(json.code, 0);
  EXPECT_NE(json.out.find("\"flops\": 137438953472"), std::string::npos) << json.out;
  // Issue 40: a convolution's output shape where the meta device lacks the op (LibTorch 1.13):
  // fitted from CPU runs at the check dims, with its expressions; the meta device's elsewhere.
  Result conv = kforge_cli("tasks show level1/conv2d --json --tasks-dir " + tasks_dir());
  ASSERT_EQ(conv.code, 0) << conv.out;
  nlohmann::json c = nlohmann::json::parse(conv.out.substr(conv.out.find('{')));
  const nlohmann::json& out = c["outputs"].at(0);
  EXPECT_EQ(out["timed_shape"], nlohmann::json({32, 128, 96, 96})) << conv.out;
  EXPECT_TRUE(c["bytes_that_must_move"].is_number()) << conv.out;
  if (c["outputs_fitted"] == true) EXPECT_EQ(out["shape"], nlohmann::json({"N", "O", "H", "W"}));
  Result text = kforge_cli("tasks show level1/conv2d --tasks-dir " + tasks_dir());
  EXPECT_NE(text.out.find("[32, 128, 96, 96]"), std::string::npos) << text.out;
}

TEST(Cli, CheckPassesOnTheSmokeSuite) {
  Result r = kforge_cli("tasks check smoke --tasks-dir " + tasks_dir());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("4 of 4 task(s) ok"), std::string::npos) << r.out;
}

TEST(Cli, MalformedTaskFileExits2WithItsName) {
  TempDir dir;
  auto f = dir.write("s/bad.toml", kforge::test::valid_task("bad") + "\nfoo = 1\n");
  Result r = kforge_cli("tasks show " + f.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(f.string()), std::string::npos) << r.out;
}

TEST(Cli, DegenerateTaskExits1AndTheRunGoesOn) {
  TempDir dir;
  std::string degenerate = kforge::test::valid_task("deg");
  degenerate.replace(degenerate.find("torch.relu(x)"), 13, "x * 0.0");
  dir.write("s/deg.toml", degenerate);
  dir.write("s/good.toml", kforge::test::valid_task("good"));
  dir.write("s/broken.toml", "name = \"broken\"\n");
  Result r = kforge_cli("tasks check " + (dir.path() / "s").string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("degenerate: output 'out' is all zero"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok    s/good"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("summary: missing"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 of 3 task(s) ok, 2 failing"), std::string::npos) << r.out;
}

TEST(Cli, CompileEmitsPtxAndCubinAndRejectsWithExit1) {
  TempDir dir;
  std::string answer = (kforge::test::source_dir() / "tests/gpu/honest/vector_add.md").string();
  Result ok = kforge_cli("compile --answer " + answer + " --task smoke/vector_add --emit " +
                         (dir.path() / "out").string() + " --tasks-dir " + tasks_dir());
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("ok: plan, types and limits hold"), std::string::npos) << ok.out;
  EXPECT_TRUE(std::filesystem::file_size(dir.path() / "out/candidate.cubin") > 0);
  EXPECT_NE(kforge::read_file((dir.path() / "out/candidate.ptx").string())->find(".entry"),
            std::string::npos);
  auto bad = dir.write("bad.md", "Use a bigger block.\n");
  Result r = kforge_cli("compile --answer " + bad.string() +
                        " --task smoke/vector_add --tasks-dir " + tasks_dir());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("no code blocks"), std::string::npos) << r.out;
}

TEST(Cli, BadArgumentsExit2) {
  EXPECT_EQ(kforge_cli("tasks check smoke --dims sideways --tasks-dir " + tasks_dir()).code, 2);
  EXPECT_EQ(kforge_cli("frobnicate").code, 2);
  EXPECT_EQ(kforge_cli("tasks show no_such_task --tasks-dir " + tasks_dir()).code, 2);
}

// Every command that times baselines turns torch.compile off (--no-compile) and its max-autotune
// mode alone (--no-max-autotune), the slowest package to build.
TEST(Cli, EveryCommandWithNoCompileHasNoMaxAutotune) {
  for (const char* command : {"verify", "baseline", "corpus", "evolve", "gpu-worker"}) {
    Result r = kforge_cli(std::string(command) + " --help");
    EXPECT_EQ(r.code, 0) << command << "\n" << r.out;
    EXPECT_NE(r.out.find("--no-compile"), std::string::npos) << command << "\n" << r.out;
    EXPECT_NE(r.out.find("--no-max-autotune"), std::string::npos) << command << "\n" << r.out;
  }
}

// Issue 16: ordinary bad input is exit 2 or the candidate's outcome (exit 1) with a message
// that names the input, never exit 4 ("a kforge bug") or a signal.
std::string vector_add_answer() {
  return *kforge::read_file(
      (kforge::test::source_dir() / "tests/gpu/honest/vector_add.md").string());
}

std::string with(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << "test bug: " << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

Result compile_answer(const TempDir& dir, const std::string& answer,
                      const std::string& flags = "") {
  auto file = dir.write("answer.md", answer);
  return kforge_cli("compile --answer " + file.string() + " --task smoke/vector_add --tasks-dir " +
                    tasks_dir() + " " + flags);
}

TEST(Cli, TuneValuesAreWholeIntegers) {
  TempDir dir;
  for (const char* tune : {"BLOCK=128abc", "BLOCK=", "=128", "BLOCK=99999999999999999999"}) {
    Result r = compile_answer(dir, vector_add_answer(), std::string("--tune ") + tune);
    EXPECT_EQ(r.code, 2) << tune << ": " << r.out;
    EXPECT_NE(r.out.find("--tune: '" + std::string(tune) + "' is not NAME=integer"),
              std::string::npos)
        << r.out;
  }
  EXPECT_EQ(compile_answer(dir, vector_add_answer(), "--tune BLOCK=128").code, 0);
}

TEST(Cli, BadPlanBytesAndNumbersAreTheCandidatesOutcome) {
  TempDir dir;
  // Non-ASCII in an expression, with --json: the message is JSON-safe.
  Result r = compile_answer(
      dir, with(vector_add_answer(), "ceil_div(N, BLOCK)", "ceil_div(N, BLOCK) \xc3\xa9"),
      "--json");
  EXPECT_EQ(r.code, 1) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["stage"], "plan");
  EXPECT_NE(j["errors"][0].get<std::string>().find("launch[0].grid[0]"), std::string::npos)
      << r.out;
  // A real number past a double.
  r = compile_answer(dir, with(vector_add_answer(), "\"N\"] }", "1e400] }"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("rejected at the plan stage"), std::string::npos) << r.out;
  // A tunable named like a keyword or a reserved macro.
  for (const char* name : {"int", "__CUDA_ARCH__"}) {
    r = compile_answer(
        dir, with(with(vector_add_answer(), "\"BLOCK\": [", std::string("\"") + name + "\": ["),
                  "[\"BLOCK\"]", "[128]"));
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find(std::string("tune.") + name + ": '" + name + "' is"), std::string::npos)
        << r.out;
  }
}

TEST(Cli, BadSourceBytesAreTheCandidatesOutcome) {
  TempDir dir;
  // A NUL byte would cut what NVRTC compiles while the identity hashes all of it.
  std::string nul = with(vector_add_answer(), "  const int stride",
                         "  // " + std::string(1, '\0') + "\n  const int stride");
  Result r = compile_answer(dir, nul);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("answer.md:8: error: a NUL byte"), std::string::npos)
      << r.out;  // the answer's line
  // Bytes that are not UTF-8, with --json: exit 1 and JSON that parses.
  r = compile_answer(dir, with(vector_add_answer(), "const int stride", "const int stride\xff"),
                     "--json");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(nlohmann::json::parse(r.out)["errors"][0].get<std::string>().find("not UTF-8"),
            std::string::npos)
      << r.out;
  // `#line 4294967295`: NVRTC's log names a line past int.
  r = compile_answer(
      dir, with(vector_add_answer(), "  const int stride",
                "#line 4294967295\n  const int stride = undefined_name;\n  const int stride2"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("rejected at the compile stage"), std::string::npos) << r.out;
}

TEST(Cli, UntrustedTextIsPrintedWithoutTerminalEscapes) {
  TempDir dir;
  // The kernel name comes back in the error message: its ESC must not reach the terminal.
  Result r = compile_answer(dir, with(vector_add_answer(), "\"kernel\": \"vector_add\"",
                                      "\"kernel\": \"vector_add\\u001b[2J\""));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vector_add\\x1B[2J"), std::string::npos) << r.out;
}

TEST(Cli, TasksShowNamesBadTaskPaths) {
  TempDir dir;
  ASSERT_EQ(::symlink((dir.path() / "loop.toml").c_str(), (dir.path() / "loop.toml").c_str()), 0);
  Result r = kforge_cli("tasks show " + (dir.path() / "loop.toml").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("loop.toml: cannot read"), std::string::npos) << r.out;
  // Input bytes past 64 bits.
  std::string big = kforge::test::valid_task("big");
  big = with(with(big, "N = 64", "N = 2147483648"), "[\"N\"]", "[\"N\", \"N\"]");
  r = kforge_cli("tasks show " + dir.write("s/big.toml", big).string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("big.toml:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("overflow 64 bits"), std::string::npos) << r.out;
}

}  // namespace
