// Seeded mutations of what kforge reads from outside (task files, LLM answers and their launch
// plans, expressions, archive lines): no crash, no hang, no unbounded memory, and every error is
// one kforge raises for bad input and names the input (never the "kforge bug" class, exit 4).
// Each target runs in a forked child under a memory and time limit; a failing case is reported
// with its seed so it can be replayed (KFORGE_FUZZ_CASES scales the number of cases).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "compile_test_util.h"
#include "kforge/archive/archive.h"
#include "kforge/common/expr.h"
#include "kforge/common/files.h"
#include "kforge/compile/answer.h"
#include "kforge/compile/plan.h"
#include "kforge/compile/source_check.h"
#include "kforge/tasks/task.h"

namespace {

using kforge::test::TempDir;

// splitmix64: a counter-based stream, so case i of a target is the same on every machine.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n ? static_cast<size_t>(next() % n) : 0; }
};

const std::vector<std::string>& dictionary() {
  static const std::vector<std::string> d = {
      "1e400", "-9223372036854775808", "9223372036854775807", "18446744073709551616", "4294967295", "-1", "0", "nan",
      "inf", "\"\"", "[]", "{}", "null", "true", "\"B * N\"", "ceil_div(", "min(", ")", "BLOCK", "__CUDA_ARCH__", "int",
      "#include \"/etc/passwd\"\n", "%:include </proc/self/environ>\n", "#line 4294967295\n", "\x1b[31m", "\xc3\x28",
      "\xff\xfe", std::string(1, '\0'), "((((((((((((((((", "[[[[[[[[[[[[[[[[", "{{{{{{{{{{{{{{{{", "\"\"\"", "'''",
      "\\u0000", "\\ud800", "\n[x]\n", "\n[[inputs]]\n", "= ", "```", "```cuda\n", "```json\n", "<!-- task: x -->",
      "__global__", "template <int B>", "<", ">", ",", ":", "\\", "\"", "\n"};
  return d;
}

// 1 to 4 edits: a byte changed, a dictionary token inserted, a range deleted, a range repeated
// (deep nesting, long lines), a truncation.
std::string mutate(const std::string& seed, Rng& rng) {
  std::string s = seed;
  int edits = 1 + static_cast<int>(rng.below(4));
  for (int e = 0; e < edits; ++e) {
    size_t at = rng.below(s.size() + 1);
    switch (rng.below(6)) {
      case 0:
        if (!s.empty()) s[rng.below(s.size())] = static_cast<char>(rng.below(256));
        break;
      case 1: s.insert(at, dictionary()[rng.below(dictionary().size())]); break;
      case 2: s.erase(at, rng.below(32)); break;
      case 3: {
        size_t len = 1 + rng.below(16);
        std::string piece = s.substr(at, len);
        size_t times = rng.below(4) == 0 ? 20000 + rng.below(80000) : 1 + rng.below(16);
        std::string rep;
        while (rep.size() < 1000000 && times--) rep += piece;
        s.insert(at, rep);
        break;
      }
      case 4: s.resize(at); break;
      default: {
        std::string token = dictionary()[rng.below(dictionary().size())];
        s.insert(at, std::string(1000 + rng.below(100000), token.empty() ? '(' : token[0]));
      }
    }
  }
  return s;
}

// What a target reports for one case: "" when it passed or failed as bad input should.
using Target = std::function<std::string(const std::string& input)>;

// Runs `cases` mutations of the seeds through `target` in a child process limited to 4 GiB of
// data and `seconds` in all; returns the failures (with the case numbers) or why the child died.
std::string fuzz(const std::vector<std::string>& seeds, int cases, int seconds, uint64_t salt, const Target& target) {
  if (const char* scale = std::getenv("KFORGE_FUZZ_CASES")) cases = std::max(1, std::atoi(scale) * cases / 1000);
  int pipefd[2];
  if (::pipe(pipefd) != 0) return "pipe failed";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipefd[0]);
    rlimit mem{4ULL << 30, 4ULL << 30};
    ::setrlimit(RLIMIT_DATA, &mem);
    ::alarm(static_cast<unsigned>(seconds));
    auto say = [&](const std::string& line) { (void)!::write(pipefd[1], line.data(), line.size()); };
    int failures = 0;
    for (int i = 0; i < cases && failures < 20; ++i) {
      Rng rng{salt * 1000003 + static_cast<uint64_t>(i)};
      std::string input = mutate(seeds[rng.below(seeds.size())], rng);
      say("case " + std::to_string(i) + "\n");
      auto t0 = std::chrono::steady_clock::now();
      std::string problem;
      try {
        problem = target(input);
      } catch (const std::exception& e) {
        problem = std::string("escaped: ") + e.what();
      }
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (secs > 5.0) problem += " (took " + std::to_string(secs) + " s)";
      if (!problem.empty()) {
        ++failures;
        say("FAIL case " + std::to_string(i) + " (salt " + std::to_string(salt) + "): " + problem.substr(0, 400) + "\n");
      }
    }
    ::_exit(0);
  }
  ::close(pipefd[1]);
  std::string out;
  std::array<char, 4096> buf;
  ssize_t n;
  while ((n = ::read(pipefd[0], buf.data(), buf.size())) > 0) out.append(buf.data(), static_cast<size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::string failures, last_case;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("case ", 0) == 0) last_case = line;
    else failures += line + "\n";
  }
  if (WIFSIGNALED(status))
    failures += "the child died of signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ") at " +
                last_case + " (salt " + std::to_string(salt) + ")" +
                (WTERMSIG(status) == SIGALRM ? ": a hang, or the cases took over " + std::to_string(seconds) + " s" : "") + "\n";
  return failures;
}

// An exception from bad input must be one of kforge's and name the input it came from.
std::string named(const std::exception& e, const std::string& input_name) {
  if (!dynamic_cast<const kforge::Error*>(&e)) return std::string("not a kforge error (exit 4): ") + e.what();
  std::string what = e.what();
  if (what.find(input_name) == std::string::npos) return "the error does not name " + input_name + ": " + what;
  return "";
}

std::vector<std::string> files_under(const std::string& dir, const std::string& ext, size_t max) {
  std::vector<std::string> out;
  FILE* p = ::popen(("find " + dir + " -name '*" + ext + "' | sort | head -" + std::to_string(max)).c_str(), "r");
  std::array<char, 4096> buf;
  std::string list;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) list.append(buf.data(), n);
  ::pclose(p);
  std::istringstream lines(list);
  for (std::string f; std::getline(lines, f);) out.push_back(*kforge::read_file(f));
  return out;
}

std::string source_dir() { return kforge::test::source_dir().string(); }

TEST(Fuzz, Expressions) {
  std::vector<std::string> seeds = {"ceil_div(B * N, BLOCK)", "min(ceil_div(B * N, BLOCK), 8 * num_sms)", "BLOCK * 4 <= 49152",
                                    "max(1, N / (VEC * 32)) % 7", "-(B - 1) * -2"};
  std::string failures = fuzz(seeds, 3000, 30, 1, [](const std::string& text) -> std::string {
    try {
      kforge::Expr e = kforge::Expr::parse(text);
      kforge::IntNames names = {{"B", 4096}, {"N", 8192}, {"BLOCK", 256}, {"num_sms", 132}, {"VEC", 4}};
      for (const std::string& n : e.names()) names.emplace(n, 3);
      (void)e.eval(names);
    } catch (const kforge::ExprError&) {
    }
    return "";
  });
  EXPECT_EQ(failures, "");
}

TEST(Fuzz, TaskFiles) {
  TempDir dir;
  std::vector<std::string> seeds = files_under(source_dir() + "/tasks", ".toml", 100);
  ASSERT_GE(seeds.size(), 50u);
  std::string path = (dir.path() / "fuzzed.toml").string();
  std::string failures = fuzz(seeds, 2000, 50, 2, [&](const std::string& text) -> std::string {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    try {
      kforge::tasks::load_task(path);
    } catch (const std::exception& e) {
      return named(e, path);
    }
    return "";
  });
  EXPECT_EQ(failures, "");
}

TEST(Fuzz, AnswersAndPlans) {
  std::vector<std::string> seeds = files_under(source_dir() + "/tasks/smoke/seeds", ".md", 20);
  for (const std::string& s : files_under(source_dir() + "/tests/gpu/exploits", ".md", 40)) seeds.push_back(s);
  ASSERT_GE(seeds.size(), 20u);
  auto relu = kforge::test::CompileFixture::load("smoke/relu");
  std::string failures = fuzz(seeds, 3000, 50, 3, [&](const std::string& text) -> std::string {
    using namespace kforge::compile;
    Answer a;
    try {
      a = parse_answer(text);
    } catch (const AnswerError&) {
      return "";
    }
    (void)preprocessing_problems(a.source, candidate_include_dirs());
    try {
      Plan p = parse_plan_text(a.plan, relu.task, relu.tensors);
      for (const LaunchSpec& l : p.launches) (void)name_expression_problem(l.kernel);
      std::vector<Tunables> space = tune_space(p, relu.task.dims, DeviceFacts{});
      if (space.size() > 100000) return "a tune space of " + std::to_string(space.size()) + " points";
      (void)evaluate_plan(p, relu.task.dims, default_tunables(p), DeviceFacts{});
    } catch (const PlanError&) {
    }
    return "";
  });
  EXPECT_EQ(failures, "");
}

TEST(Fuzz, ArchiveLines) {
  TempDir dir;
  std::vector<std::string> seeds;
  FILE* p = ::popen(("zcat " + source_dir() + "/docs/results/seeds-2026-12-03.jsonl.gz | head -4").c_str(), "r");
  std::array<char, 65536> buf;
  std::string text;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) text.append(buf.data(), n);
  ::pclose(p);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) seeds.push_back(line);
  seeds.push_back(R"({"Op_Name": "relu", "Level_ID": 1, "Task_ID": 19, "Kernel_Name": "k", "CUDA_Code": "__global__ void k() {}", "CUDA_Runtime": 0.1, "Correct": true})");
  ASSERT_GE(seeds.size(), 3u);
  std::string db = (dir.path() / "fuzz.db").string();
  auto archive = kforge::archive::Archive::open(db);
  std::string failures = fuzz(seeds, 600, 50, 4, [&](const std::string& line) -> std::string {
    std::istringstream in(line);
    try {
      archive.import_jsonl(in, "fuzzed.jsonl");
    } catch (const std::exception& e) {
      return named(e, "fuzzed.jsonl");
    }
    return "";
  });
  EXPECT_EQ(failures, "");
}

}  // namespace
