// Helpers shared by the test suites.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace kforge::test {

// A fresh folder under $TMPDIR (or /tmp), removed at the end of the test. POSIX calls rather than
// std::filesystem: on the GPU machine, LibTorch 2.11's wheel interposes std::filesystem symbols of
// an older libstdc++, and temp_directory_path/create_directories/remove_all crashed there.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/kforge-test-XXXXXX";
    if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed for " + templ);
    path_ = templ;
  }
  ~TempDir() {
    ::nftw(
        path_.c_str(),
        [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::filesystem::path path() const { return path_; }
  std::filesystem::path write(const std::string& relative, const std::string& content) const {
    std::string full = path_ + "/" + relative;
    for (size_t at = full.find('/', path_.size() + 1); at != std::string::npos;
         at = full.find('/', at + 1))
      ::mkdir(full.substr(0, at).c_str(), 0755);
    std::ofstream(full) << content;
    return full;
  }

 private:
  std::string path_;
};

inline std::filesystem::path source_dir() {
  return KFORGE_SOURCE_DIR;
}

struct CliResult {
  int code = -1;    // the exit status; 128 + N for signal N
  std::string out;  // standard output and error together
};

// A shell command line's exit status and its output (stdout and stderr together).
inline CliResult run_command(const std::string& cmd) {
  CliResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// The Python kforge would pick that can import torch ("" when none): python3 on PATH, then
// Debian's.
inline std::string torch_python() {
  for (const std::string& py : {std::string("python3"), std::string("/usr/bin/python3")}) {
    std::string cmd = py + " -c 'import torch' > /dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return py;
  }
  return "";
}

#define REQUIRE_TORCH()                                                                        \
  if (kforge::test::torch_python().empty())                                                    \
  GTEST_SKIP() << "no Python with PyTorch (python3 or /usr/bin/python3 cannot import torch); " \
                  "install python3-torch (scripts/deps.sh does)"

#ifdef KFORGE_BINARY
// The kforge binary with `args` (shell words), after `env` (shell assignments, e.g. "COLUMNS=60").
inline CliResult run_kforge(const std::string& args, const std::string& env = "") {
  return run_command(env + (env.empty() ? "" : " ") + KFORGE_BINARY + " " + args);
}
#endif

// A GoogleTest parameter name from free text: every character that is not alphanumeric becomes '_'.
inline std::string test_name(std::string text) {
  for (char& ch : text)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return text;
}

// A minimal valid task, for tests that change one thing of it.
inline std::string valid_task(const std::string& name = "t") {
  return "name = \"" + name + R"("
summary = "relu"
reference = """
def forward(x: Tensor) -> Tensor:
    return torch.relu(x)
"""

[dims]
N = 64

[[inputs]]
name = "x"
dtype = "float32"
shape = ["N"]
init = "randn"

[check]
dims = [{ N = 1 }, { N = 37 }]
)";
}

}  // namespace kforge::test
