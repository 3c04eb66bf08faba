// Helpers shared by the test suites.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kforge::test {

// A fresh folder under the test's temporary directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("kforge-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& relative, const std::string& content) const {
    std::filesystem::path p = path_ / relative;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << content;
    return p;
  }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::filesystem::path path_;
};

inline std::filesystem::path source_dir() { return KFORGE_SOURCE_DIR; }

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
