// `kforge tasks import-kernelbench` runs the problem's code (docs/security.md, "KernelBench import
// runs the problem's code"): the real kforge binary on hostile problem files
// (tests/kernelbench/hostile/, kept apart from the problems tests/test_kernelbench.cpp imports).
// Each problem is accounted for (converted, failed with the reason, or not reached), none can
// forge the import's channel, write outside its folder, read a secret, hang or end the import.
// Tests skip, saying so, where no Python has PyTorch.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <sstream>

#include "problem_output.h"
#include "test_util.h"

namespace kforge::test {
namespace {

bool has_line(const std::string& out, const std::string& pattern) {
  return std::regex_search(out, std::regex(pattern, std::regex::multiline));
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A copy of hostile problems in a fresh folder (what they write next to themselves lands there),
// imported in the given order into <dir>/out/t.
struct HostileImport {
  TempDir dir;
  CliResult r;
  double seconds = 0;

  HostileImport(const std::vector<std::string>& names, const std::string& flags = "",
                const std::string& env = "", const std::string& beside = "") {
    if (!beside.empty()) dir.write("problems/" + beside, "the-secret-beside-the-problem");
    std::string files;
    for (const std::string& n : names) {
      auto p = dir.write("problems/" + n, slurp(source_dir() / "tests/kernelbench/hostile" / n));
      files += " " + p.string();
    }
    auto start = std::chrono::steady_clock::now();
    r = run_kforge("tasks import-kernelbench" + files + " --suite t --out " +
                       (dir.path() / "out").string() + " --python " + torch_python() + " " + flags,
                   env);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  bool confined() const { return r.out.find("NOT confined") == std::string::npos; }
};

// A print() at module level, and in forward(), went into the import's channel: the whole import
// ended with exit 4 ("printed a line that is not JSON"). Later, on kforge's stderr as it came, a
// problem's unfinished line ran into kforge's next line of progress. Now each line the problem
// prints is shown whole, labelled with its file, before the problem's outcome.
TEST(KernelBenchConfined, PrintsDoNotReachTheImportsChannel) {
  REQUIRE_TORCH();
  HostileImport im({"5_prints.py", "0_plain_relu.py"});
  SCOPED_TRACE(im.r.out);
  EXPECT_TRUE(has_line(im.r.out, "^converted  .*5_prints.py -> t/kb_5_prints: dims"));
  EXPECT_TRUE(has_line(im.r.out, "^converted  .*0_plain_relu.py -> t/kb_0_plain_relu: dims"));
  EXPECT_TRUE(has_line(im.r.out, "^output     .*5_prints.py: hello from the problem$"));
  EXPECT_TRUE(has_line(im.r.out, "^output     .*5_prints.py: hello from forward$"));
  EXPECT_FALSE(has_line(im.r.out, "^hello"));
  EXPECT_LT(im.r.out.rfind("5_prints.py: hello"), im.r.out.find("converted  "));
  EXPECT_TRUE(has_line(im.r.out, "^imported 2 of 2 KernelBench problem\\(s\\) \\(100%\\)"));
  EXPECT_EQ(im.r.code, 0);
}

// A problem printed a JSON line like the helper's, whose name left --out: kforge wrote
// <dir>/ESCAPED.toml. Now no channel it can reach is kforge's, and names are kforge's own.
TEST(KernelBenchConfined, AForgedReplyWritesNothingAndNamesAreKforges) {
  REQUIRE_TORCH();
  HostileImport im({"4_forges_replies.py", "0_plain_relu.py"});
  SCOPED_TRACE(im.r.out);
  EXPECT_FALSE(std::filesystem::exists(im.dir.path() / "ESCAPED.toml"));
  EXPECT_FALSE(std::filesystem::exists(im.dir.path() / "out" / "ESCAPED.toml"));
  EXPECT_FALSE(has_line(im.r.out, "^converted  forged"));
  EXPECT_FALSE(has_line(im.r.out, "^\\{"));  // its forged lines are shown as its output
  EXPECT_TRUE(has_line(im.r.out, "^output     .*4_forges_replies.py: \\{\"file\": \"forged\""));
  EXPECT_TRUE(
      has_line(im.r.out, "^converted  .*4_forges_replies.py -> t/kb_4_forges_replies: dims"));
  EXPECT_TRUE(has_line(im.r.out, "^converted  .*0_plain_relu.py -> t/kb_0_plain_relu: dims"));
  std::vector<std::string> written;
  for (const auto& e : std::filesystem::directory_iterator(im.dir.path() / "out" / "t"))
    written.push_back(e.path().filename().string());
  std::sort(written.begin(), written.end());
  EXPECT_EQ(written,
            (std::vector<std::string>{"kb_0_plain_relu.toml", "kb_4_forges_replies.toml"}));
  EXPECT_EQ(im.r.code, 0);
}

// os._exit(0) in forward() ended the helper: the import said nothing of the problems after it
// and exited 0.
TEST(KernelBenchConfined, AProblemEndingItsProcessFailsAloneAndTheRestGoOn) {
  REQUIRE_TORCH();
  HostileImport im({"7_exits_in_forward.py", "0_plain_relu.py"});
  SCOPED_TRACE(im.r.out);
  EXPECT_TRUE(has_line(im.r.out,
                       "^failed     .*7_exits_in_forward.py: its process exited with status 0 "
                       "without a result \\(the problem's code ended it\\)$"));
  EXPECT_TRUE(has_line(im.r.out, "^converted  .*0_plain_relu.py -> t/kb_0_plain_relu: dims"));
  EXPECT_TRUE(has_line(im.r.out,
                       "^imported 1 of 2 KernelBench problem\\(s\\) \\(50%\\) into .*; 1 could not "
                       "be converted$"));
  EXPECT_EQ(im.r.code, 1);
}

// A problem that kills kforge, then its importer: kforge lives on (it used to die), the problem
// fails alone and the rest are converted. With Landlock ABI 6 its signals do not leave its own
// process; before, the importer dies, and a fresh one goes on.
TEST(KernelBenchConfined, AProblemKillingTheImporterFailsAloneAndTheRestGoOn) {
  REQUIRE_TORCH();
  HostileImport im({"8_kills_its_parent.py", "0_plain_relu.py"});
  SCOPED_TRACE(im.r.out);
  EXPECT_TRUE(has_line(im.r.out,
                       "^failed     .*8_kills_its_parent.py: (kforge's importer killed by signal 9 "
                       "\\(Killed\\) while it ran \\(the problem's code ended it\\)|running the "
                       "module failed: PermissionError: \\[Errno 1\\] Operation not permitted)$"));
  EXPECT_TRUE(has_line(im.r.out, "^converted  .*0_plain_relu.py -> t/kb_0_plain_relu: dims"));
  EXPECT_TRUE(has_line(im.r.out, "^imported 1 of 2 KernelBench problem\\(s\\)"));
  EXPECT_EQ(im.r.code, 1);
}

// A problem that ignores SIGALRM and sleeps hung the import for good: kforge now keeps the
// deadline itself (--time-limit), kills it, and goes on.
TEST(KernelBenchConfined, AProblemThatNeverEndsIsStoppedAtKforgesDeadline) {
  REQUIRE_TORCH();
  HostileImport im({"2_sleeps_ignoring_alarm.py", "0_plain_relu.py"}, "--time-limit 4");
  SCOPED_TRACE(im.r.out);
  EXPECT_TRUE(
      has_line(im.r.out,
               "^failed     .*2_sleeps_ignoring_alarm.py: took more than 4 s to convert and "
               "check \\(stopped at kforge's deadline, --time-limit\\)$"));
  EXPECT_TRUE(has_line(im.r.out, "^converted  .*0_plain_relu.py -> t/kb_0_plain_relu: dims"));
  EXPECT_LT(im.seconds, 90);
  EXPECT_EQ(im.r.code, 1);
  CliResult bad = run_kforge("tasks import-kernelbench x.py --suite t --time-limit 0");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--time-limit: must be a number of seconds above 0"), std::string::npos)
      << bad.out;
}

// A problem that takes 6 GiB is stopped by the import's memory limit (that of the reference
// child, KFORGE_REFERENCE_MEMORY_LIMIT), failing with the reason.
TEST(KernelBenchConfined, AProblemEatingMemoryIsStoppedByTheLimit) {
  REQUIRE_TORCH();
  HostileImport im({"3_eats_memory.py", "0_plain_relu.py"}, "", "KFORGE_REFERENCE_MEMORY_LIMIT=2G");
  SCOPED_TRACE(im.r.out);
  EXPECT_TRUE(
      has_line(im.r.out, "^failed     .*3_eats_memory.py: running the module failed: MemoryError"));
  EXPECT_TRUE(has_line(im.r.out, "^converted  .*0_plain_relu.py -> t/kb_0_plain_relu: dims"));
  EXPECT_EQ(im.r.code, 1);
}

// The problem wrote next to itself, read a file there, and would have read an API key had kforge
// passed one: it may only write its private folder and read Python, PyTorch and itself.
TEST(KernelBenchConfined, AProblemWritesOnlyItsFolderAndReadsNoSecret) {
  REQUIRE_TORCH();
  HostileImport im({"1_writes_and_reads_outside.py", "0_plain_relu.py"}, "",
                   "OPENAI_API_KEY=sk-test-not-a-real-key-123456", "secret.txt");
  SCOPED_TRACE(im.r.out);
  EXPECT_TRUE(has_line(im.r.out, "^converted  .*0_plain_relu.py -> t/kb_0_plain_relu: dims"));
  EXPECT_EQ(im.r.out.find("sk-test-not-a-real-key"), std::string::npos);
  EXPECT_EQ(im.r.out.find("the-secret-beside"), std::string::npos);
  if (!im.confined()) GTEST_SKIP() << "no Landlock in this kernel: " << im.r.out;
  EXPECT_TRUE(has_line(im.r.out,
                       "^failed     .*1_writes_and_reads_outside.py: running the module failed: "
                       "RuntimeError: wrote=denied secret=denied key=none$"));
  EXPECT_FALSE(std::filesystem::exists(im.dir.path() / "problems" / "WRITTEN_BY_PROBLEM"));
}

// A size constant of 0 is bad input, said so (exit 1), not "a kforge bug" (exit 4).
TEST(KernelBenchConfined, ASizeOfZeroIsBadInputWithTheReason) {
  REQUIRE_TORCH();
  HostileImport im({"6_dim_0.py", "0_plain_relu.py"});
  SCOPED_TRACE(im.r.out);
  EXPECT_TRUE(
      has_line(im.r.out,
               "^failed     .*6_dim_0.py: input 1 \\('x'\\) has an empty dimension \\(shape "
               "\\[[0-9]+, 0\\]\\): the size constant dim = 0 must be at least 1$"));
  EXPECT_EQ(im.r.out.find("kforge bug"), std::string::npos);
  EXPECT_EQ(im.r.code, 1);
}

// A problem that clears the screen, prints a 10000-byte line and 500 more: each line labelled,
// the escape character shown as '?', the long line cut, and past 200 lines a count instead.
TEST(KernelBenchConfined, AFloodOfOutputIsShownSafeAndCut) {
  REQUIRE_TORCH();
  HostileImport im({"9_floods_output.py"});
  SCOPED_TRACE(im.r.out.substr(0, 20000));
  EXPECT_TRUE(has_line(im.r.out, "^converted  .*9_floods_output.py -> t/kb_9_floods_output: dims"));
  EXPECT_EQ(im.r.out.find('\x1b'), std::string::npos);
  EXPECT_TRUE(has_line(im.r.out, "^output     .*9_floods_output.py: \\?\\[2Jcleared the screen$"));
  EXPECT_TRUE(has_line(im.r.out,
                       "^output     .*9_floods_output.py: x{2000} \\.\\.\\. \\(8000 "
                       "bytes cut\\)$"));
  EXPECT_TRUE(has_line(im.r.out, "^output     .*9_floods_output.py: line 1$"));  // its stderr
  EXPECT_TRUE(has_line(im.r.out,
                       "^output     .*9_floods_output.py: \\([0-9]+ more line\\(s\\) "
                       "not shown\\)$"));
  size_t shown = 0;
  std::istringstream lines(im.r.out);
  for (std::string line; std::getline(lines, line);) shown += line.rfind("output     ", 0) == 0;
  EXPECT_EQ(shown, 201u);  // 200 lines and the count
  EXPECT_EQ(im.r.code, 0);
}

// The relay alone: lines labelled by the problem under way, whole however the helper's messages
// cut them, an unfinished line shown when its problem ends, then what was not shown, counted.
TEST(ProblemOutputRelay, LabelsWholeLinesAndShowsAnUnfinishedOneAtTheEnd) {
  std::vector<std::string> shown;
  tasks::ProblemOutput out(
      [&](const std::string& who, const std::string& line) { shown.push_back(who + ": " + line); });
  out.begin("a.py");
  out.take("one\ntw");
  EXPECT_EQ(shown, (std::vector<std::string>{"a.py: one"}));
  out.take("o\tand\rthree");
  out.dropped(12);
  out.begin("b.py");
  for (size_t i = 0; i < tasks::ProblemOutput::kShownLines + 3; ++i) out.take("x\n");
  out.end();
  ASSERT_EQ(shown.size(), 4 + tasks::ProblemOutput::kShownLines);
  EXPECT_EQ(shown[1], "a.py: two\tand?three");
  EXPECT_EQ(shown[2], "a.py: (12 more byte(s) printed, not kept)");
  EXPECT_EQ(shown[3], "b.py: x");
  EXPECT_EQ(shown.back(), "b.py: (3 more line(s) not shown)");
}

// Every hostile problem in one import (a folder): each accounted for, kforge neither killed nor
// hung, nothing written outside --out.
TEST(KernelBenchConfined, EveryHostileProblemIsAccountedFor) {
  REQUIRE_TORCH();
  TempDir dir;
  for (const auto& e :
       std::filesystem::directory_iterator(source_dir() / "tests/kernelbench/hostile"))
    dir.write("problems/" + e.path().filename().string(), slurp(e.path()));
  CliResult r = run_kforge("tasks import-kernelbench " + (dir.path() / "problems").string() +
                               " --suite t --time-limit 4 --out " + (dir.path() / "out").string() +
                               " --python " + torch_python(),
                           "KFORGE_REFERENCE_MEMORY_LIMIT=2G");
  SCOPED_TRACE(r.out);
  EXPECT_EQ(r.code, 1);
  size_t accounted = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() / "problems"))
    if (e.path().extension() == ".py")
      accounted += has_line(r.out, "^(converted  |failed     |not reached ).*" +
                                       e.path().filename().string() + "( ->|:)");
  EXPECT_EQ(accounted, 10u);
  EXPECT_TRUE(has_line(r.out,
                       "^imported 4 of 10 KernelBench problem\\(s\\) \\(40%\\) into .*; 6 could "
                       "not be converted$"));
  // Every line is kforge's: what the problems printed is labelled, one whole line at a time.
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    EXPECT_TRUE(std::regex_search(
        line,
        std::regex("^($|importing |           |converted  |failed     |not reached |output     "
                   "|checking |ok    |[0-9]+ of [0-9]+ task|imported |next: )")))
        << line;
  std::vector<std::string> top;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    top.push_back(e.path().filename().string());
  std::sort(top.begin(), top.end());
  EXPECT_EQ(top, (std::vector<std::string>{"out", "problems"}));
}

}  // namespace
}  // namespace kforge::test
