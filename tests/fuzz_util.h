// Seeded mutation fuzzing for the tests of what kforge reads from outside: a counter-based stream
// of mutations of seed inputs, run through a target in a forked child under a memory and time limit
// (tests/test_fuzz.cpp says what each target must hold). Every suite that adds a target includes
// this.
#pragma once
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
#include <string>
#include <vector>

#include "kforge/common/error.h"
#include "kforge/common/files.h"
#include "test_util.h"

namespace kforge::test::fuzzing {

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

inline const std::vector<std::string>& dictionary() {
  static const std::vector<std::string> d = {"1e400",
                                             "-9223372036854775808",
                                             "9223372036854775807",
                                             "18446744073709551616",
                                             "4294967295",
                                             "-1",
                                             "0",
                                             "nan",
                                             "inf",
                                             "\"\"",
                                             "[]",
                                             "{}",
                                             "null",
                                             "true",
                                             "\"B * N\"",
                                             "ceil_div(",
                                             "min(",
                                             ")",
                                             "BLOCK",
                                             "__CUDA_ARCH__",
                                             "int",
                                             "#include \"/etc/passwd\"\n",
                                             "%:include </proc/self/environ>\n",
                                             "#line 4294967295\n",
                                             "\x1b[31m",
                                             "\xc3\x28",
                                             "\xff\xfe",
                                             std::string(1, '\0'),
                                             "((((((((((((((((",
                                             "[[[[[[[[[[[[[[[[",
                                             "{{{{{{{{{{{{{{{{",
                                             "\"\"\"",
                                             "'''",
                                             "\\u0000",
                                             "\\ud800",
                                             "\n[x]\n",
                                             "\n[[inputs]]\n",
                                             "= ",
                                             "```",
                                             "```cuda\n",
                                             "```json\n",
                                             "<!-- task: x -->",
                                             "__global__",
                                             "template <int B>",
                                             "<",
                                             ">",
                                             ",",
                                             ":",
                                             "\\",
                                             "\"",
                                             "\n"};
  return d;
}

// 1 to 4 edits: a byte changed, a dictionary token inserted, a range deleted, a range repeated
// (deep nesting, long lines), a truncation.
inline std::string mutate(const std::string& seed, Rng& rng) {
  std::string s = seed;
  int edits = 1 + static_cast<int>(rng.below(4));
  for (int e = 0; e < edits; ++e) {
    size_t at = rng.below(s.size() + 1);
    switch (rng.below(6)) {
      case 0:
        if (!s.empty()) s[rng.below(s.size())] = static_cast<char>(rng.below(256));
        break;
      case 1:
        s.insert(at, dictionary()[rng.below(dictionary().size())]);
        break;
      case 2:
        s.erase(at, rng.below(32));
        break;
      case 3: {
        size_t len = 1 + rng.below(16);
        std::string piece = s.substr(at, len);
        size_t times = rng.below(4) == 0 ? 20000 + rng.below(80000) : 1 + rng.below(16);
        std::string rep;
        while (rep.size() < 1000000 && times--) rep += piece;
        s.insert(at, rep);
        break;
      }
      case 4:
        s.resize(at);
        break;
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
inline std::string fuzz(const std::vector<std::string>& seeds, int cases, int seconds,
                        uint64_t salt, const Target& target) {
  if (const char* scale = std::getenv("KFORGE_FUZZ_CASES"))
    cases = std::max(1, std::atoi(scale) * cases / 1000);
  int pipefd[2];
  if (::pipe(pipefd) != 0) return "pipe failed";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipefd[0]);
    rlimit mem{4ULL << 30, 4ULL << 30};
    ::setrlimit(RLIMIT_DATA, &mem);
    ::alarm(static_cast<unsigned>(seconds));
    auto say = [&](const std::string& line) {
      (void)!::write(pipefd[1], line.data(), line.size());
    };
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
        say("FAIL case " + std::to_string(i) + " (salt " + std::to_string(salt) +
            "): " + problem.substr(0, 400) + "\n");
      }
    }
    ::_exit(0);
  }
  ::close(pipefd[1]);
  std::string out;
  std::array<char, 4096> buf;
  ssize_t n;
  while ((n = ::read(pipefd[0], buf.data(), buf.size())) > 0)
    out.append(buf.data(), static_cast<size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::string failures, last_case;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("case ", 0) == 0)
      last_case = line;
    else
      failures += line + "\n";
  }
  if (WIFSIGNALED(status))
    failures += "the child died of signal " + std::to_string(WTERMSIG(status)) + " (" +
                strsignal(WTERMSIG(status)) + ") at " + last_case + " (salt " +
                std::to_string(salt) + ")" +
                (WTERMSIG(status) == SIGALRM
                     ? ": a hang, or the cases took over " + std::to_string(seconds) + " s"
                     : "") +
                "\n";
  return failures;
}

// An exception from bad input must be one of kforge's and name the input it came from.
inline std::string named(const std::exception& e, const std::string& input_name) {
  if (!dynamic_cast<const kforge::Error*>(&e))
    return std::string("not a kforge error (exit 4): ") + e.what();
  std::string what = e.what();
  if (what.find(input_name) == std::string::npos)
    return "the error does not name " + input_name + ": " + what;
  return "";
}

inline std::vector<std::string> files_under(const std::string& dir, const std::string& ext,
                                            size_t max) {
  std::vector<std::string> out;
  FILE* p = ::popen(
      ("find " + dir + " -name '*" + ext + "' | sort | head -" + std::to_string(max)).c_str(), "r");
  std::array<char, 4096> buf;
  std::string list;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) list.append(buf.data(), n);
  ::pclose(p);
  std::istringstream lines(list);
  for (std::string f; std::getline(lines, f);) out.push_back(*kforge::read_file(f));
  return out;
}

inline std::string source_dir_string() {
  return kforge::test::source_dir().string();
}

}  // namespace kforge::test::fuzzing
