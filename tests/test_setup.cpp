// scripts/find-libtorch.sh: how setup finds the CUDA LibTorch a GPU machine needs.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "test_util.h"

namespace {

using kforge::test::TempDir;

struct Found {
  int code = -1;
  std::string out;
};

Found find_libtorch(const std::string& env) {
  std::string cmd =
      env + " " + (kforge::test::source_dir() / "scripts/find-libtorch.sh").string() + " 2>&1";
  Found f;
  FILE* p = ::popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) f.out.append(buf.data(), n);
  int status = ::pclose(p);
  f.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (!f.out.empty() && f.out.back() == '\n') f.out.pop_back();
  return f;
}

TEST(Setup, FindsAnUnpackedCudaLibTorch) {
  TempDir dir;
  dir.write("libtorch/share/cmake/Torch/TorchConfig.cmake", "");
  std::string lt = (dir.path() / "libtorch").string();
  // A CPU-only LibTorch does not count.
  EXPECT_EQ(find_libtorch("Torch_DIR= PYTHON=false LIBTORCH=" + lt).code, 1);
  dir.write("libtorch/lib/libtorch_cuda.so", "");
  Found f = find_libtorch("Torch_DIR= PYTHON=false LIBTORCH=" + lt);
  EXPECT_EQ(f.code, 0);
  EXPECT_EQ(f.out, lt + "/share/cmake");
  // Torch_DIR comes first.
  f = find_libtorch("PYTHON=false LIBTORCH= Torch_DIR=" + lt + "/share/cmake/Torch");
  EXPECT_EQ(f.code, 0);
  EXPECT_EQ(f.out, lt);
}

TEST(Setup, FindsTheLibTorchInsideAnInstalledCudaPyTorch) {
  TempDir dir;
  // A stand-in python3 whose torch is a CUDA build: prints its cmake_prefix_path.
  auto py = dir.write("python3",
                      "#!/bin/sh\necho /opt/venv/lib/python3.12/site-packages/torch/share/cmake\n");
  ::chmod(py.c_str(), 0755);
  Found f = find_libtorch("Torch_DIR= LIBTORCH= PYTHON=" + py.string());
  EXPECT_EQ(f.code, 0);
  EXPECT_EQ(f.out, "/opt/venv/lib/python3.12/site-packages/torch/share/cmake");
  auto cpu = dir.write("python3-cpu", "#!/bin/sh\nexit 1\n");  // torch.version.cuda is None
  ::chmod(cpu.c_str(), 0755);
  f = find_libtorch("Torch_DIR= LIBTORCH= PYTHON=" + cpu.string());
  EXPECT_EQ(f.code, 1);
  EXPECT_EQ(f.out, "");
}

}  // namespace
